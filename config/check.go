package config

import (
	"errors"
	"fmt"
)

// CheckTaskConfig is what `dmctl task start` does with a task file before
// it writes anything (and all that `--dry-run` does): decode in Strict mode,
// validate, split into one SubTaskConfig per source. Every problem is
// reported at once in one error: unknown and refused fields together with
// the validation problems of the rest. errors.Is(err, ErrInvalidConfig)
// holds for all but syntax errors. The task (with its Notes) is returned
// whenever the file could be read, even when it is invalid.
func CheckTaskConfig(data []byte) (*TaskConfig, []*SubTaskConfig, error) {
	c := NewTaskConfig()
	notes, fields, err := decodeInto("task config", data, c, Strict)
	if err != nil {
		return nil, nil, err
	}
	c.Notes = notes
	c.Adjust()
	if err := joinProblems(fields, c.Validate()); err != nil {
		return c, nil, err
	}
	subs, err := c.SubTaskConfigs()
	if err != nil {
		return c, nil, err
	}
	return c, subs, nil
}

// CheckSourceConfig is what `dmctl source create` does with a source file
// before it writes anything: decode in Strict mode and validate, every
// problem reported at once as in CheckTaskConfig.
func CheckSourceConfig(data []byte) (*SourceConfig, error) {
	c := NewSourceConfig()
	notes, fields, err := decodeInto("source config", data, c, Strict)
	if err != nil {
		return nil, err
	}
	c.Notes = notes
	c.Adjust()
	if err := joinProblems(fields, c.Validate()); err != nil {
		return c, err
	}
	return c, nil
}

// joinProblems joins the field problems of decoding with those of
// validation; nil when there are none.
func joinProblems(fields *DecodeError, invalid error) error {
	var errs []error
	if fields != nil {
		errs = append(errs, fields)
	}
	if invalid != nil {
		errs = append(errs, fmt.Errorf("invalid values:\n%w", invalid))
	}
	return errors.Join(errs...)
}
