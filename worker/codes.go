package worker

// Error codes the worker itself puts into status and HTTP answers
// (DESIGN.md §6). Each constant is named like its string. Codes of the data
// plane live with their units (unit/syncer, relay); codes shared by every
// package (errs.CodeInternal) live in pkg/errs.

// The worker's own (not per-task) problems, in the top-level "errors".
const (
	CodeSourceConfigMissing = "source-config-missing"
	CodeSourceConfigInvalid = "source-config-invalid"
	// CodeConfigUnknownField is the status warning for fields of a config
	// value in etcd that the worker does not know (DESIGN.md §3): the value
	// is used without them, and the warning names each field's path so that
	// whoever wrote the value can fix it. It is listed in the worker's
	// "errors" only, never in a subtask's own errors, since the subtask runs.
	CodeConfigUnknownField = "config-unknown-field"
	// CodePasswordUndecryptable: a password looks encrypted but the worker
	// has no key (or the wrong one) to decrypt it.
	CodePasswordUndecryptable = "password-undecryptable"
)

// Control-plane problems with a task's or the relay's etcd keys.
const (
	CodeSubTaskStageWithoutConfig = "subtask-stage-without-config"
	CodeSubTaskValueMalformed     = "subtask-value-malformed"
	CodeSubTaskConfigInvalid      = "subtask-config-invalid"
	CodeSubTaskNameInvalid        = "subtask-name-invalid"
	CodeRelayStageMalformed       = "relay-stage-malformed"
	CodeRelayCreateFailed         = "relay-create-failed"
	// CodeRelayOff: relay was turned off for the source while a reader
	// waited for it to start (resumable: the reader then reads the source).
	CodeRelayOff                 = "relay-off"
	CodeStreamStageWithoutConfig = "stream-stage-without-config"
	CodeStreamValueMalformed     = "stream-value-malformed"
	CodeStreamConfigInvalid      = "stream-config-invalid"
	CodeStreamNameInvalid        = "stream-name-invalid"
	// CodeStreamMetaUnavailable: the local stream meta store cannot be
	// opened, read or written (a corrupt or locked file, a full disk).
	CodeStreamMetaUnavailable = "stream-meta-unavailable"
	// CodeStreamIgnoreUntreated: a resume with ignore-untreated could not
	// read the source's current position.
	CodeStreamIgnoreUntreated = "stream-ignore-untreated"
)

// Failures a SubTask puts into its Result outside a unit's Process.
const (
	CodeUnitCreate   = "unit-create"   // the factory could not build the pipeline
	CodeUnitInit     = "unit-init"     // a unit's Init failed
	CodeUnitProgress = "unit-progress" // a unit could not tell whether it has saved progress
)

// Stable error codes of the HTTP API.
const (
	CodeNotFound               = "not-found"
	CodeMethodNotAllowed       = "method-not-allowed"
	CodeBadRequest             = "bad-request"
	CodeSubTaskNotFound        = "subtask-not-found"
	CodeStreamNotFound         = "stream-not-found"
	CodeNotBound               = "not-bound"
	CodeRelayNotEnabled        = "relay-not-enabled"
	CodePurgeForbidden         = "purge-forbidden"
	CodeHandleErrorUnsupported = "handle-error-unsupported"
	CodeValidatorNotRunning    = "validator-not-running"
	CodeValidationErrNotFound  = "validation-error-not-found"
	CodeTargetUnavailable      = "target-unavailable"
	CodeForbidden              = "forbidden"
	CodeRequestTooLarge        = "request-too-large"
)
