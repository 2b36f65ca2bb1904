package unit

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/dmworker/dm-worker/config"
	"github.com/dmworker/dm-worker/pkg/errs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// nopUnit is the smallest Unit: it only reports its type, so the registry
// tests can tell which constructor ran.
type nopUnit struct{ t Type }

func (u *nopUnit) Type() Type                                          { return u.t }
func (u *nopUnit) Init(context.Context) error                          { return nil }
func (u *nopUnit) Process(context.Context) Result                      { return Result{} }
func (u *nopUnit) Pause()                                              {}
func (u *nopUnit) Resume(context.Context) Result                       { return Result{} }
func (u *nopUnit) Update(context.Context, *config.SubTaskConfig) error { return nil }
func (u *nopUnit) Close()                                              {}
func (u *nopUnit) Kill()                                               {}
func (u *nopUnit) Status() any                                         { return map[string]any{} }
func (u *nopUnit) IsFreshTask(context.Context) (bool, error)           { return true, nil }

func ctor(t Type) Constructor {
	return func(*config.SubTaskConfig, *zap.Logger) (Unit, error) { return &nopUnit{t: t}, nil }
}

func TestPipeline(t *testing.T) {
	tests := []struct {
		mode     string
		want     []Type
		wantCode string
	}{
		{"full", []Type{TypeDump, TypeLoad}, ""},
		{"all", []Type{TypeDump, TypeLoad, TypeSync}, ""},
		{"incremental", []Type{TypeSync}, ""},
		{"", nil, CodeTaskModeInvalid},
		{"ALL", nil, CodeTaskModeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			got, err := Pipeline(tt.mode)
			if errs.Code(err) != tt.wantCode {
				t.Fatalf("Pipeline(%q) error %v, want code %q", tt.mode, err, tt.wantCode)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Pipeline(%q) = %v, want %v", tt.mode, got, tt.want)
			}
		})
	}
}

func TestRegistryCheckMode(t *testing.T) {
	tests := []struct {
		name     string
		units    []Type
		mode     string
		wantCode string
		wantMsg  string
	}{
		{"all present", []Type{TypeDump, TypeLoad, TypeSync}, "all", "", ""},
		{"sync only runs incremental", []Type{TypeSync}, "incremental", "", ""},
		{"sync only lacks all", []Type{TypeSync}, "all", CodeTaskModeUnsupported,
			`unit: task-mode "all" needs units Dump, Load, which this build does not have; use task-mode incremental`},
		{"dump load lacks all", []Type{TypeDump, TypeLoad}, "all", CodeTaskModeUnsupported,
			`unit: task-mode "all" needs units Sync, which this build does not have; use task-mode full`},
		{"nothing", nil, "full", CodeTaskModeUnsupported,
			`unit: task-mode "full" needs units Dump, Load, which this build does not have; no task mode is available in this build`},
		{"unknown mode", []Type{TypeSync}, "fast", CodeTaskModeInvalid,
			`unit: task-mode "fast" is unknown; use full, all or incremental`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[Type]Constructor{}
			for _, u := range tt.units {
				m[u] = ctor(u)
			}
			err := NewRegistry(m, nil).CheckMode(tt.mode)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("CheckMode(%q) = %v, want nil", tt.mode, err)
				}
				return
			}
			if errs.Code(err) != tt.wantCode || err.Error() != tt.wantMsg {
				t.Fatalf("CheckMode(%q) = [%s] %v\nwant [%s] %s", tt.mode, errs.Code(err), err, tt.wantCode, tt.wantMsg)
			}
			if errs.IsResumable(err) {
				t.Fatalf("CheckMode error is resumable")
			}
		})
	}
}

func TestRegistryNew(t *testing.T) {
	boom := errors.New("boom")
	r := NewRegistry(map[Type]Constructor{
		TypeSync: ctor(TypeSync),
		TypeLoad: func(*config.SubTaskConfig, *zap.Logger) (Unit, error) { return nil, boom },
	}, nil)
	cfg := &config.SubTaskConfig{Name: "task1"}
	tests := []struct {
		name     string
		typ      Type
		wantErr  error
		wantCode string
	}{
		{"registered", TypeSync, nil, ""},
		{"constructor error", TypeLoad, boom, errs.CodeInternal},
		{"missing", TypeDump, nil, CodeUnitUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := r.NewUnit(tt.typ, cfg, zap.NewNop())
			if errs.Code(err) != tt.wantCode {
				t.Fatalf("NewUnit(%s) error %v, want code %q", tt.typ, err, tt.wantCode)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewUnit(%s) error %v does not wrap %v", tt.typ, err, tt.wantErr)
			}
			if tt.wantCode == "" && u.Type() != tt.typ {
				t.Fatalf("NewUnit(%s) built %s", tt.typ, u.Type())
			}
		})
	}
	if _, err := r.NewValidator(cfg, nil, zap.NewNop()); errs.Code(err) != CodeValidatorUnsupported {
		t.Fatalf("NewValidator without constructor: %v", err)
	}
}

func TestResultResumable(t *testing.T) {
	now := time.Now()
	res := errs.Error{Code: "a", Resumable: true, Time: now}
	non := errs.Error{Code: "b", Resumable: false, Time: now}
	tests := []struct {
		name          string
		r             *Result
		failed, resum bool
	}{
		{"nil", nil, false, false},
		{"ok", &Result{}, false, false},
		{"canceled", &Result{IsCanceled: true}, false, false},
		{"resumable", &Result{Errors: []errs.Error{res, res}}, true, true},
		{"mixed", &Result{Errors: []errs.Error{res, non}}, true, false},
		{"not resumable", &Result{Errors: []errs.Error{non}}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.r.Failed() != tt.failed || tt.r.Resumable() != tt.resum {
				t.Fatalf("Failed=%v Resumable=%v, want %v %v", tt.r.Failed(), tt.r.Resumable(), tt.failed, tt.resum)
			}
			if c := tt.r.Clone(); !reflect.DeepEqual(c, tt.r) {
				t.Fatalf("Clone = %+v, want %+v", c, tt.r)
			}
		})
	}
}
