package local

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The system's user and group databases, which a task sees with its own
// user added (userDB).
const (
	passwdFile = "/etc/passwd"
	groupFile  = "/etc/group"
)

// userName is the name a team's user and group go by in its tasks'
// databases: gpufleet-<team>, with anything but lowercase letters, digits
// and '-' made '-' (team names are already so).
func userName(team core.TeamName) string {
	if team == "" {
		team = "default"
	}
	b := []byte(string(team))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	return "gpufleet-" + string(b)
}

// userDB writes attempt-N/passwd and attempt-N/group: the system's
// databases with the task's user and group in them (any entry of the same
// name or ID left out), and returns them as the files the sandbox binds
// over the system's. Programs look their user up (getpwuid: PyTorch's
// compile cache, pip, git, ssh) and fail when it is missing.
func userDB(adir, name string, uid, gid int, home string) ([]bindMount, error) {
	user := fmt.Sprintf("%s:x:%d:%d:gpufleet team user:%s:/bin/sh", name, uid, gid, home)
	group := fmt.Sprintf("%s:x:%d:", name, gid)
	var binds []bindMount
	for _, f := range []struct {
		system, own, line string
		id                int
	}{
		{passwdFile, filepath.Join(adir, "passwd"), user, uid},
		{groupFile, filepath.Join(adir, "group"), group, gid},
	} {
		old, err := os.ReadFile(f.system)
		if err != nil {
			old = nil // a system without one gets none (bindFile skips it)
		}
		b := withEntry(old, name, f.id, f.line)
		if err := os.WriteFile(f.own, b, 0o644); err != nil {
			return nil, err
		}
		// WriteFile keeps the mode of a file written before (a retried
		// start): the task's user reads it through the bind.
		if err := os.Chmod(f.own, 0o644); err != nil {
			return nil, err
		}
		binds = append(binds, bindMount{Src: f.own, Dst: f.system, RO: true})
	}
	return binds, nil
}

// withEntry returns the database db (passwd or group lines, "name:x:id:...")
// with line as its last entry, and without the entries named name or
// numbered id.
func withEntry(db []byte, name string, id int, line string) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(db))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		f := strings.SplitN(l, ":", 4)
		if len(f) >= 3 && (f[0] == name || f[2] == strconv.Itoa(id)) {
			continue
		}
		out.WriteString(l)
		out.WriteByte('\n')
	}
	out.WriteString(line)
	out.WriteByte('\n')
	return out.Bytes()
}
