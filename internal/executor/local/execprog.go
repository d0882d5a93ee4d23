package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// execProgram execs prog for the task, from inside its sandbox, so that the
// program is found and checked as the task's user sees the files: a name
// with a slash as it is (relative to the working directory), any other in
// the directories of the task's PATH, in order, as execvp does (a
// directory that holds no such file, or one the task may not execute,
// is passed over). It returns only on failure.
func execProgram(prog string, argv, env, readOnly []string) error {
	if strings.Contains(prog, "/") {
		return programError(prog, syscall.Exec(prog, argv, env), readOnly)
	}
	path := envValue(env, "PATH")
	var denied error
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		err := syscall.Exec(filepath.Join(dir, prog), argv, env)
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		case errors.Is(err, syscall.EACCES):
			if denied == nil {
				denied = programError(filepath.Join(dir, prog), err, readOnly)
			}
		default:
			return programError(filepath.Join(dir, prog), err, readOnly)
		}
	}
	if denied != nil {
		return denied
	}
	return &startError{Kind: startNotFound, Name: prog, Msg: "exec: " + strconv.Quote(prog) + ": executable file not found in $PATH (" + path + ")"}
}

// programError describes why exec of p failed.
func programError(p string, err error, readOnly []string) error {
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		return &startError{Kind: startNotFound, Name: p, Msg: fmt.Sprintf("exec %s: %v", p, err)}
	case errors.Is(err, syscall.EACCES):
		return &startError{Kind: startDenied, Name: p, Msg: fmt.Sprintf("exec %s: %v (a workload runs only programs its user may execute, in its own directories and the system paths %s)",
			p, err, strings.Join(readOnly, ", "))}
	}
	return fmt.Errorf("exec %s: %w", p, err)
}

// Kinds of startError.
const (
	startNotFound = "notfound"
	startDenied   = "denied"
	startNoSpace  = "nospace"
)

// startError is a program the sandbox could not execute. It crosses the
// sandbox's and the supervisor's pipes as one line of JSON, so that Start
// returns an error wrapping exec.ErrNotFound or fs.ErrPermission, as it
// does for what it checks itself.
type startError struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Msg  string `json:"msg"`
}

func (e *startError) Error() string { return e.Msg }

func (e *startError) Unwrap() error {
	switch e.Kind {
	case startNotFound:
		return exec.ErrNotFound
	case startDenied:
		return fs.ErrPermission
	case startNoSpace:
		return syscall.ENOSPC
	}
	return nil
}

// noSpace marks an error of the supervisor's for want of disk space, so
// that Start's error says so (executor.ErrNoSpace) across the pipe.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return &startError{Kind: startNoSpace, Msg: err.Error()}
	}
	return err
}

// encodeStartError is err as the sandbox writes it to the supervisor: a
// startError as JSON, any other error as its text, on one line.
func encodeStartError(err error) string {
	var se *startError
	if errors.As(err, &se) {
		b, _ := json.Marshal(se)
		return string(b)
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// decodeStartError reads what encodeStartError wrote.
func decodeStartError(msg string) error {
	msg = strings.TrimSpace(msg)
	var se startError
	if strings.HasPrefix(msg, "{") && json.Unmarshal([]byte(msg), &se) == nil && se.Kind != "" {
		return &se
	}
	return errors.New(msg)
}
