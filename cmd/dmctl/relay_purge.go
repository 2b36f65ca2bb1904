package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// purgeRequest is the body of POST /api/v1/relay/purge (DESIGN.md §6);
// exactly one field is set.
type purgeRequest struct {
	Inactive bool   `json:"inactive,omitempty"`
	Filename string `json:"filename,omitempty"`
	Time     string `json:"time,omitempty"`
}

// purgeResult is the --output json document of "relay purge".
type purgeResult struct {
	Source string   `json:"source"`
	Worker string   `json:"worker"`
	Purged []string `json:"purged"`
}

// localTimeLayout is DM's time form without a zone.
const localTimeLayout = "2006-01-02 15:04:05"

func relayPurge(ctx context.Context, e *env, cmd *command, args []string) error {
	fs := newFlags(cmd)
	inactive := fs.Bool("inactive", false, "purge every relay file no reader or subtask still needs")
	filename := fs.String("filename", "", "purge the relay files before this one (e.g. mariadb-bin.000003)")
	at := fs.String("time", "", "purge the relay files last written before this time (RFC 3339, or \"2006-01-02 15:04:05\" in dmctl's local time zone)")
	pos, err := positionalFlags(cmd, fs, args, "source")
	if err != nil {
		return err
	}
	source := pos[0]
	var req purgeRequest
	set := 0
	if *inactive {
		req.Inactive = true
		set++
	}
	if *filename != "" {
		if strings.ContainsAny(*filename, "/\\") {
			return usagef(cmd, "--filename %q: give a relay binlog file name without a directory, e.g. mariadb-bin.000003", *filename)
		}
		req.Filename = *filename
		set++
	}
	if *at != "" {
		t, err := parsePurgeTime(*at)
		if err != nil {
			return usagef(cmd, "--time %q: %v", *at, err)
		}
		req.Time = t.UTC().Format(time.RFC3339)
		set++
	}
	if set != 1 {
		return usagef(cmd, "give exactly one of --inactive, --filename F or --time T")
	}
	_, c, err := e.cluster(ctx)
	if err != nil {
		return err
	}
	if err := c.checkSource(source); err != nil {
		return err
	}
	worker, addr, err := c.sourceWorker(source)
	if err != nil {
		return err
	}
	var ans struct {
		Purged []string `json:"purged"`
	}
	if err := e.postWorker(ctx, worker, addr, "/api/v1/relay/purge", req, &ans); err != nil {
		return fmt.Errorf("purge relay of source %s: %w", source, err)
	}
	res := purgeResult{Source: source, Worker: worker, Purged: ans.Purged}
	if res.Purged == nil {
		res.Purged = []string{}
	}
	return e.emit(res, func(w io.Writer) error {
		if len(res.Purged) == 0 {
			_, err := fmt.Fprintf(w, "relay of source %s on worker %s: nothing to purge\n", source, worker)
			return err
		}
		_, err := fmt.Fprintf(w, "relay of source %s on worker %s: purged %d file(s):\n  %s\n",
			source, worker, len(res.Purged), strings.Join(res.Purged, "\n  "))
		return err
	})
}

// parsePurgeTime reads RFC 3339 or DM's "2006-01-02 15:04:05" (local
// time).
func parsePurgeTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	t, err := time.ParseInLocation(localTimeLayout, s, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("use RFC 3339 (2026-01-02T15:04:05Z) or \"2026-01-02 15:04:05\"")
	}
	return t, nil
}
