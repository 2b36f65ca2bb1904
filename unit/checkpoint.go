package unit

import "github.com/dmworker/dm-worker/pkg/binlog"

// CheckpointHolder is implemented by units that read binlog from a saved
// location (the sync unit). The relay purger keeps every relay file from
// that location on while the unit's subtask is paused or new.
type CheckpointHolder interface {
	// CheckpointLocation is the saved location the unit resumes from; ok is
	// false when it has none yet.
	CheckpointLocation() (loc binlog.Location, ok bool)
}
