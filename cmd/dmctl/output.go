package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// emit prints a command's result: doc as one indented JSON document with
// --output json, otherwise what text writes.
func (e *env) emit(doc any, text func(w io.Writer) error) error {
	if e.opts.output == outputJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return fmt.Errorf("write JSON output: %w", err)
		}
		return nil
	}
	if err := text(e.stdout); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// emitf is emit with a text output of one formatted line (or lines).
func (e *env) emitf(doc any, format string, args ...any) error {
	return e.emit(doc, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, format, args...)
		return err
	})
}

// table writes rows under a header as aligned columns; empty cells show as
// "-".
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	writeRow(tw, header)
	for _, r := range rows {
		writeRow(tw, r)
	}
	return tw.Flush()
}

func writeRow(w io.Writer, cols []string) {
	for i, c := range cols {
		if c == "" {
			c = "-"
		}
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprintln(w)
}
