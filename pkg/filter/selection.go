package filter

import (
	"fmt"

	"github.com/dmworker/dm-worker/config"
)

// Selection is how a subtask selects and routes binlog changes: its
// block-allow list, its event filter rules (the source's after the
// subtask's) and its routes. The sync unit and the validator build theirs
// with NewSelection, so both select exactly the same changes.
type Selection struct {
	Tables *Tables
	Events *EventFilter
	Router *Router
	// Rows are the subtask's expression filters (nil: none).
	Rows *RowFilter
}

// NewSelection builds the selection of subtask cfg of source src. As in DM,
// names compare case-sensitively when the subtask or its source says so,
// and the source's filters apply after the subtask's. A bad filter rule is
// an error naming the subtask and the rule.
func NewSelection(cfg *config.SubTaskConfig, src *config.SourceConfig) (Selection, error) {
	caseSensitive := cfg.CaseSensitive || src.CaseSensitive
	events, err := NewEventFilter(config.WithSourceFilters(cfg.FilterRules, src.Filters, caseSensitive), caseSensitive)
	if err != nil {
		return Selection{}, fmt.Errorf("subtask %q: %w", cfg.Name, err)
	}
	return Selection{Tables: NewTables(cfg.BAList, caseSensitive), Events: events,
		Router: NewRouter(cfg.RouteRules, cfg.SourceID, caseSensitive), Rows: NewRowFilter(cfg.ExprFilter, caseSensitive)}, nil
}
