package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// ArraySpec makes a submission a job array (POST /arrays): one workload,
// a task, for each index Start to End inclusive, each with env
// GPUFLEET_ARRAY_INDEX=<index> and GPUFLEET_ARRAY_ID=<array>. MaxRunning >
// 0 caps how many of its tasks run at once. On a task, the server sets ID
// (the array's) and Index (the task's); its ID is "<array>-<index>".
type ArraySpec struct {
	Start      int    `json:"start"`
	End        int    `json:"end"`
	MaxRunning int    `json:"maxRunning,omitempty"`
	ID         string `json:"id,omitempty"`
	Index      *int   `json:"index,omitempty"`
}

// Len is the number of tasks.
func (a *ArraySpec) Len() int { return a.End - a.Start + 1 }

// String is the range as --array takes it: "0-999%50".
func (a *ArraySpec) String() string {
	s := strconv.Itoa(a.Start) + "-" + strconv.Itoa(a.End)
	if a.MaxRunning > 0 {
		s += "%" + strconv.Itoa(a.MaxRunning)
	}
	return s
}

// Array is a job array as the server reports it (POST and GET /arrays):
// what every task shares, its range, and its tasks counted by phase.
type Array struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Team       string `json:"team"`
	Owner      string `json:"owner"`
	Start      int    `json:"start"`
	End        int    `json:"end"`
	MaxRunning int    `json:"maxRunning,omitempty"`
	// Tasks is the number of tasks; Phases counts them by phase.
	Tasks  int            `json:"tasks"`
	Phases map[string]int `json:"phases"`
	// TaskIDs are the IDs of the first tasks (at most ArrayTaskIDs); the
	// task of index i is always "<id>-<i>".
	TaskIDs []string `json:"taskIDs"`
}

// ArrayTaskIDs bounds Array.TaskIDs.
const ArrayTaskIDs = 10

// TaskID is the ID of an array's task of index i.
func TaskID(array string, i int) string { return array + "-" + strconv.Itoa(i) }

// SubmitArray submits w, whose Array is set, as a job array: every task
// is stored, or none. A non-empty idempotencyKey makes a retry with the
// same key and body return the same array.
func (c *Client) SubmitArray(ctx context.Context, w *Workload, idempotencyKey string) (*Array, error) {
	hdr := http.Header{}
	if idempotencyKey != "" {
		hdr.Set("Idempotency-Key", idempotencyKey)
	}
	var out Array
	return &out, c.do(ctx, http.MethodPost, "/arrays", hdr, w, &out)
}

// GetArray reads a job array, with its tasks counted by phase.
func (c *Client) GetArray(ctx context.Context, id string) (*Array, error) {
	var out Array
	return &out, c.do(ctx, http.MethodGet, "/arrays/"+url.PathEscape(id), nil, nil, &out)
}

// CancelArray cancels every task of a job array that has not finished,
// and returns the array as it then stands.
func (c *Client) CancelArray(ctx context.Context, id string) (*Array, error) {
	var out Array
	return &out, c.do(ctx, http.MethodDelete, "/arrays/"+url.PathEscape(id), nil, nil, &out)
}
