package core

import "errors"

// Error kinds. Packages wrap these with context ("workload wl-1: not found")
// and the API server maps them to HTTP status in one place, with errors.Is.
var (
	ErrNotFound  = errors.New("not found")
	ErrConflict  = errors.New("conflict")
	ErrInvalid   = errors.New("invalid")
	ErrForbidden = errors.New("forbidden")
	// ErrUnavailable: a part the request needs cannot serve it now (the
	// store is closed, or its disk answers I/O errors); retrying later may
	// succeed.
	ErrUnavailable = errors.New("unavailable")
	// ErrNoSpace: the store's disk is full, so nothing can be written
	// (reads still work) until space is freed. No write that failed with it
	// was acknowledged.
	ErrNoSpace = errors.New("no space left on the store's disk")
	// ErrLimit: a limit on how much a caller may ask (pending workloads,
	// request rate) is reached; retrying later may succeed.
	ErrLimit = errors.New("limit reached")
	// ErrIdempotency: an idempotency key was reused with another request.
	ErrIdempotency = errors.New("idempotency key reused with a different request")
)
