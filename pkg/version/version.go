// Package version holds the build's version, stamped by the Makefile with
// -ldflags "-X github.com/dmworker/dm-worker/pkg/version.Version=...".
package version

import (
	"fmt"
	"runtime"
)

// Version and GitHash are set at link time; the defaults mark a plain
// `go build`.
var (
	Version = "v0.0.0-dev"
	GitHash = "unknown"
)

// String is the one-line version text of a binary.
func String(binary string) string {
	return fmt.Sprintf("%s %s (git %s, %s, %s/%s)", binary, Version, GitHash, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
