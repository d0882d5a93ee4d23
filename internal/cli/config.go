package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpufleet/gpufleet/api"
)

const defaultAddr = "127.0.0.1:8080"

// fileConfig is the file that `gpufleet login` writes.
type fileConfig struct {
	Addr  string `json:"addr"`
	Token string `json:"token"`
}

// configPath is $XDG_CONFIG_HOME/gpufleet/config.json, or
// ~/.config/gpufleet/config.json when XDG_CONFIG_HOME is unset (on every
// system, so that the path is the same one the docs name).
func (e *env) configPath() (string, error) {
	if dir := e.getenv("XDG_CONFIG_HOME"); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "gpufleet", "config.json"), nil
	}
	home := e.getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("find the config file: %w", err)
		}
	}
	return filepath.Join(home, ".config", "gpufleet", "config.json"), nil
}

// readConfigFile reads the login file; a missing file is an empty config.
func (e *env) readConfigFile() (fileConfig, error) {
	var fc fileConfig
	path, err := e.configPath()
	if err != nil {
		return fc, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fc, nil
	}
	if err != nil {
		return fc, err
	}
	if err := json.Unmarshal(b, &fc); err != nil {
		return fc, fmt.Errorf("config file %s: %w", path, err)
	}
	return fc, nil
}

// writeConfigFile replaces the login file with fc, readable by its owner
// only. It writes a new file and renames it, so a reader never sees half of
// it and an older file's looser mode does not survive.
func (e *env) writeConfigFile(fc fileConfig) (string, error) {
	path, err := e.configPath()
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(fc, "", "  ")
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".config-*.json")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return "", err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}

// settings resolves the server address and token, each on its own: the
// --addr and --token flags, then GPUFLEET_ADDR and GPUFLEET_TOKEN, then the
// login file, then the default address and no token.
func (e *env) settings() (addr, token string, err error) {
	addr = first(e.addrFlag, e.getenv("GPUFLEET_ADDR"))
	token = first(e.tokenFlag, e.getenv("GPUFLEET_TOKEN"))
	if addr == "" || token == "" {
		fc, err := e.readConfigFile()
		if err != nil {
			return "", "", err
		}
		addr = first(addr, fc.Addr, defaultAddr)
		token = first(token, fc.Token)
	}
	return addr, token, nil
}

// client returns an API client for the resolved settings.
func (e *env) client() (*api.Client, error) {
	addr, token, err := e.settings()
	if err != nil {
		return nil, err
	}
	return api.NewClient(addr, token), nil
}

// first returns the first non-empty string.
func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
