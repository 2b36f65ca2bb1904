//go:build bench

package bench

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs a child role when the binary was re-executed as one (see childEnv), and the
// benchmarks with a goroutine leak check otherwise.
func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(childMain(role))
	}
	goleak.VerifyTestMain(m)
}
