package core

import "errors"

// Error kinds. Packages wrap these with context ("workload wl-1: not found")
// and the API server maps them to HTTP status in one place, with errors.Is.
var (
	ErrNotFound    = errors.New("not found")
	ErrConflict    = errors.New("conflict")
	ErrInvalid     = errors.New("invalid")
	ErrForbidden   = errors.New("forbidden")
	ErrUnavailable = errors.New("unavailable")
	// ErrLimit: a limit on how much a caller may ask (pending workloads,
	// request rate) is reached; retrying later may succeed.
	ErrLimit = errors.New("limit reached")
	// ErrIdempotency: an idempotency key was reused with another request.
	ErrIdempotency = errors.New("idempotency key reused with a different request")
)
