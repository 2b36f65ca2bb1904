package relay

import "io/fs"

// File modes of what the relay creates (DESIGN.md §4a: data directories
// 0750, files holding state 0600). Binlog files hold the source's row data:
// readable by the owner and the directory's group only.
const (
	dirMode    fs.FileMode = 0o750
	metaMode   fs.FileMode = 0o600
	binlogMode fs.FileMode = 0o640
)
