package main

import (
	"context"
	"io"
	"strconv"
)

func workerCommands() []command {
	return []command{{
		name:  "worker list",
		short: "list workers: address, whether alive (keepalive present), bound source, which one leads the scheduler",
		run:   workerList,
	}}
}

// workerListJSON is the --output json document of "worker list".
type workerListJSON struct {
	Workers []workerView `json:"workers"`
}

func workerList(ctx context.Context, e *env, cmd *command, args []string) error {
	_, _, c, err := e.connectCluster(ctx, cmd, args)
	if err != nil {
		return err
	}
	ws := c.workerList()
	return e.emit(workerListJSON{Workers: ws}, func(w io.Writer) error {
		rows := make([][]string, 0, len(ws))
		for _, v := range ws {
			leader := ""
			if v.Leader {
				leader = "leader"
			}
			rows = append(rows, []string{v.Name, v.Addr, strconv.FormatBool(v.Alive), v.Source, leader})
		}
		return table(w, []string{"WORKER", "ADDR", "ALIVE", "SOURCE", "SCHEDULER"}, rows)
	})
}
