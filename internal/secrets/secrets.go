package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Keyring seals and opens secrets.
type Keyring struct{ aead cipher.AEAD }

// LoadOrCreate reads the key file, or makes one (32 random bytes, hex,
// mode 0600) when there is none.
func LoadOrCreate(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		return New(key)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secrets key %s is readable by others (mode %o): chmod 600 it", path, fi.Mode().Perm())
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("secrets key %s: want 64 hex digits", path)
	}
	return New(key)
}

// New returns a keyring for a 32-byte key.
func New(key []byte) (*Keyring, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Keyring{aead: aead}, nil
}

func aad(team, name string) []byte { return []byte("gpufleet-secret\x00" + team + "\x00" + name) }

// Seal encrypts a secret's data (key → value) for team/name.
func (k *Keyring) Seal(team, name string, data map[string]string) ([]byte, error) {
	plain, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return k.aead.Seal(nonce, nonce, plain, aad(team, name)), nil
}

// Open decrypts what Seal made for team/name.
func (k *Keyring) Open(team, name string, sealed []byte) (map[string]string, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed secret too short")
	}
	plain, err := k.aead.Open(nil, sealed[:n], sealed[n:], aad(team, name))
	if err != nil {
		return nil, fmt.Errorf("open secret %s/%s: %w", team, name, err)
	}
	var data map[string]string
	return data, json.Unmarshal(plain, &data)
}
