package main

import "github.com/dmworker/dm-worker/pkg/stage"

func validationCommands() []command {
	return []command{{
		name:  "validation start",
		args:  "TASK",
		short: "start the validator of a task on every source",
		run:   tasks.setStage(validatorStage, stage.Running),
	}, {
		name:  "validation stop",
		args:  "TASK",
		short: "stop the validator of a task on every source",
		run:   tasks.setStage(validatorStage, stage.Stopped),
	}}
}
