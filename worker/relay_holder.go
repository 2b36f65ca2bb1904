package worker

import (
	"context"

	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/binlog"
	"github.com/dmworker/dm-worker/pkg/errs"
	"github.com/dmworker/dm-worker/pkg/stage"
	"github.com/dmworker/dm-worker/relay"
)

// RelayStatus is the "relay" object of the worker status (DESIGN.md §6).
// Only Enabled is shown when relay is off.
type RelayStatus struct {
	Enabled         bool         `json:"enabled"`
	Stage           stage.Stage  `json:"stage,omitempty"`
	RelayBinlog     string       `json:"relay-binlog,omitempty"`
	RelayBinlogGTID string       `json:"relay-binlog-gtid,omitempty"`
	MasterBinlog    string       `json:"master-binlog,omitempty"`
	RelayDir        string       `json:"relay-dir,omitempty"`
	Errors          []errs.Error `json:"errors,omitempty"`
}

// RelayHolder runs the relay of one source through its stages. The relay
// stage key in etcd drives it: Running starts or resumes, Paused pauses, a
// deleted stage closes it. It is also auto-resumable by the Checker. It
// carries everything the SourceWorker and the HTTP API need of a relay, so
// nothing asserts on the concrete holder.
type RelayHolder interface {
	Resumable
	// Start begins pulling binlog; it returns once the relay runs.
	Start(ctx context.Context) error
	// Pause stops pulling, keeping what was written; explicit, so the
	// checker never resumes it.
	Pause(ctx context.Context) error
	// Resume continues after Pause or an error.
	Resume(ctx context.Context) error
	// Close stops gracefully and waits; Kill stops at once and waits.
	Close()
	Kill()
	Status() RelayStatus
	// Reader returns a new relay reader for one consumer (the sync unit,
	// stream tasks).
	Reader() binlog.StreamOpener
	// AddPurgeBlocker adds a source of positions the purger must keep:
	// paused or new subtasks that still need relay files. Readers block
	// purges by themselves.
	AddPurgeBlocker(b relay.Blocker)
	// Purge removes relay files (POST /api/v1/relay/purge); errors are
	// *APIError when the request cannot be carried out.
	Purge(ctx context.Context, req PurgeRequest) ([]string, error)
}

// RelayFactory creates the relay holder of a source. The relay directory
// and everything else the relay needs are bound into the factory by its
// creator. ctx is the life of the holder's owner: when it ends, the
// relay's pull and purger are cancelled (Close still has to release the
// relay).
type RelayFactory func(ctx context.Context, cfg *config.SourceConfig, logger *zap.Logger) (RelayHolder, error)
