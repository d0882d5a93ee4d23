package secrets

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Store seals secrets into the store and opens them for a start.
type Store struct {
	Store *store.Store
	Keys  *Keyring
}

// Create seals and stores a new secret; its keys are returned sorted.
func (s *Store) Create(ctx context.Context, team core.TeamName, name string, data map[string]string, now time.Time) (store.Secret, error) {
	sealed, err := s.Keys.Seal(string(team), name, data)
	if err != nil {
		return store.Secret{}, err
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sec := store.Secret{Team: team, Name: name, Keys: keys, Sealed: sealed, CreatedAt: now.UTC()}
	return sec, s.Store.CreateSecret(ctx, sec)
}

// Env opens the named secrets of a team into environment variables (a
// later secret's key wins over an earlier's).
func (s *Store) Env(ctx context.Context, team core.TeamName, names []string) (map[string]string, error) {
	env := map[string]string{}
	err := s.open(ctx, team, names, func(_ string, data map[string]string) {
		for k, v := range data {
			env[k] = v
		}
	})
	return env, err
}

// Files opens the named secrets of a team as files: secret, key, value.
func (s *Store) Files(ctx context.Context, team core.TeamName, names []string) (map[string]map[string][]byte, error) {
	files := map[string]map[string][]byte{}
	err := s.open(ctx, team, names, func(name string, data map[string]string) {
		files[name] = make(map[string][]byte, len(data))
		for k, v := range data {
			files[name][k] = []byte(v)
		}
	})
	return files, err
}

func (s *Store) open(ctx context.Context, team core.TeamName, names []string, use func(name string, data map[string]string)) error {
	for _, n := range names {
		sec, err := s.Store.Secret(ctx, team, n)
		if err != nil {
			return fmt.Errorf("secret %s of team %s: %w", n, team, err)
		}
		data, err := s.Keys.Open(string(team), n, sec.Sealed)
		if err != nil {
			return err
		}
		use(n, data)
	}
	return nil
}
