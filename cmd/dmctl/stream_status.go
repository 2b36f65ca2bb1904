package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// streamStatusJSON is the --output json document of "stream status".
type streamStatusJSON struct {
	Stream  string               `json:"stream"`
	Sources []sourceStreamStatus `json:"sources"`
}

// sourceStreamStatus is a stream's status on one source.
type sourceStreamStatus struct {
	Source string `json:"source"`
	// Worker is the worker bound to the source ("" when none).
	Worker string `json:"worker"`
	// Expect is the expected stage in etcd ("" when the stage key is
	// missing); IgnoreUntreated is the stage value's flag.
	Expect          string `json:"expect"`
	IgnoreUntreated bool   `json:"ignore-untreated,omitempty"`
	// Stream is the worker's stream object as the worker wrote it
	// (DESIGN.md §6: name, stage, state, checkpoint, checkpoint-gtid,
	// events, lag-seconds, fill-history, skipped, errors), null when the
	// worker does not report the stream.
	Stream json.RawMessage `json:"stream"`
	// Note says why Stream is null.
	Note string `json:"note,omitempty"`
	// Errors are the worker's top-level errors about this stream.
	Errors []json.RawMessage `json:"errors"`
}

// streamObject is the part of a worker's stream object the text output
// shows.
type streamObject struct {
	Stage          string        `json:"stage"`
	State          string        `json:"state"`
	Checkpoint     string        `json:"checkpoint"`
	CheckpointGTID string        `json:"checkpoint-gtid"`
	Events         int64         `json:"events"`
	LagSeconds     float64       `json:"lag-seconds"`
	FillHistory    *fillProgress `json:"fill-history"`
	Skipped        string        `json:"skipped"`
	Errors         []statusError `json:"errors"`
}

// fillProgress is the fill-history part of a stream object.
type fillProgress struct {
	Tables     int   `json:"tables"`
	TablesDone int   `json:"tables-done"`
	Rows       int64 `json:"rows"`
}

func streamStatus(ctx context.Context, e *env, cmd *command, args []string) error {
	pos, st, err := e.connect(ctx, cmd, args, "stream")
	if err != nil {
		return err
	}
	name := pos[0]
	sources, err := streams.sources(ctx, st, name)
	if err != nil {
		return err
	}
	snap, err := readStatusSnapshot(ctx, st)
	if err != nil {
		return err
	}
	doc := streamStatusJSON{Stream: name, Sources: make([]sourceStreamStatus, 0, len(sources))}
	for _, s := range sources {
		item, _, err := st.GetStream(ctx, s, name)
		if err != nil {
			return fmt.Errorf("read stream %s of source %s: %w", name, s, err)
		}
		sts := sourceStreamStatus{Source: s}
		if item != nil && item.Stage != nil {
			sts.Expect, sts.IgnoreUntreated = string(item.Stage.Expect), item.Stage.IgnoreUntreated
		}
		var ws *workerStatus
		if sts.Worker, ws, sts.Errors, err = snap.forSource(ctx, e, s, name); err != nil {
			return err
		}
		if err := pickStream(ws, name, &sts); err != nil {
			return fmt.Errorf("status of worker %s: %w", sts.Worker, err)
		}
		doc.Sources = append(doc.Sources, sts)
	}
	return e.emit(doc, func(out io.Writer) error { return printStreamStatus(out, &doc) })
}

// pickStream copies stream's object and top-level errors from ws (nil when
// the worker has no status) into sts, or says in sts.Note why there is no
// object.
func pickStream(ws *workerStatus, stream string, sts *sourceStreamStatus) error {
	switch {
	case sts.Worker == "":
		sts.Note = fmt.Sprintf("source %s is not bound to a worker; the stream runs once it is bound (`dmctl bind %s WORKER`)",
			sts.Source, sts.Source)
		return nil
	case ws == nil:
		sts.Note = fmt.Sprintf("no readable status from worker %s (not running, or just started)", sts.Worker)
		return nil
	}
	obj, err := findNamed(ws.Streams, stream)
	if err != nil {
		return fmt.Errorf("decode stream entry: %w", err)
	}
	sts.Stream = obj
	switch {
	case obj != nil:
	case ws.Streams == nil:
		sts.Note = fmt.Sprintf("worker %s runs a release without stream tasks (its status has no \"streams\"); upgrade it to run stream %s",
			sts.Worker, stream)
	default:
		sts.Note = fmt.Sprintf("worker %s does not report stream %s yet: the stream was just created or changed and the worker "+
			"has not deployed it, or the worker runs a release without stream tasks", sts.Worker, stream)
	}
	errs, err := namedErrors(ws, stream)
	if err != nil {
		return err
	}
	sts.Errors = append(sts.Errors, errs...)
	return nil
}

// printStreamStatus writes the text form of a stream status.
func printStreamStatus(w io.Writer, doc *streamStatusJSON) error {
	var b strings.Builder
	fmt.Fprintf(&b, "stream %s\n", doc.Stream)
	for _, s := range doc.Sources {
		expect := dash(s.Expect)
		if s.IgnoreUntreated {
			expect += " (ignore-untreated)"
		}
		fmt.Fprintf(&b, "source %s  worker %s  expect %s", s.Source, dash(s.Worker), expect)
		var errs []statusError
		if s.Stream == nil {
			fmt.Fprintf(&b, "  (%s)\n", s.Note)
		} else {
			var o streamObject
			if err := json.Unmarshal(s.Stream, &o); err != nil {
				return fmt.Errorf("decode stream status of source %s: %w", s.Source, err)
			}
			writeStreamObject(&b, &o)
			errs = o.Errors
		}
		top, err := decodeErrors(s.Errors)
		if err != nil {
			return fmt.Errorf("source %s: %w", s.Source, err)
		}
		// The worker lists a stream's control-plane error both in the
		// stream object and among its top-level errors: show it once.
		for _, e := range top {
			if !hasError(errs, e) {
				errs = append(errs, e)
			}
		}
		writeErrors(&b, errs)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeStreamObject writes the rest of a source's line and the indented
// lines of a stream object.
func writeStreamObject(b *strings.Builder, o *streamObject) {
	fmt.Fprintf(b, "  stage %s  state %s\n", dash(o.Stage), dash(o.State))
	fmt.Fprintf(b, "  checkpoint %s  gtid %s\n", dash(o.Checkpoint), dash(o.CheckpointGTID))
	fmt.Fprintf(b, "  events %d  lag %ss\n", o.Events, strconv.FormatFloat(o.LagSeconds, 'f', -1, 64))
	if f := o.FillHistory; f != nil {
		fmt.Fprintf(b, "  fill-history %d/%d tables done, %d rows\n", f.TablesDone, f.Tables, f.Rows)
	}
	if o.Skipped != "" {
		fmt.Fprintf(b, "  skipped (ignore-untreated) %s\n", o.Skipped)
	}
}

// hasError reports whether errs holds an entry with e's code and message.
func hasError(errs []statusError, e statusError) bool {
	for _, x := range errs {
		if x.Code == e.Code && x.Message == e.Message {
			return true
		}
	}
	return false
}
