package collation

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// database/sql pools the harness closes in Cleanup may still be
		// winding down their connection openers when the process ends.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}
