package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The credentials file keeps what `oidcd admin login` obtained: per
// --addr, a person's access token issued to the built-in client
// oidcd-admin, and where to revoke it. It lives in
// $XDG_CONFIG_HOME/oidcd/credentials.json (~/.config/oidcd/ when unset),
// the directory mode 0700 and the file 0600, replaced whole on every
// change (a temporary file renamed into place), so a reader never sees
// half a file and a crash never leaves one.

// Names of the credentials file and its environment.
const (
	EnvXDGConfigHome = "XDG_CONFIG_HOME"
	credentialsDir   = "oidcd"
	credentialsName  = "credentials.json"
)

// login is one stored sign-in.
type login struct {
	Issuer        string    `json:"issuer"`
	AccessToken   string    `json:"access_token"`
	ExpiresAt     time.Time `json:"expires_at"`
	RevocationURL string    `json:"revocation_endpoint,omitempty"`
	ObtainedAt    time.Time `json:"obtained_at"`
}

// credentialsFile is the file's content: sign-ins by --addr (addrKey).
type credentialsFile struct {
	Logins map[string]login `json:"logins"`
}

// errNoHome: neither $XDG_CONFIG_HOME nor $HOME says where the file is.
var errNoHome = errors.New("no credentials file: set $HOME or $" + EnvXDGConfigHome)

// credentialsPath is where the file lives under env.
func credentialsPath(env func(string) string) (string, error) {
	dir := strings.TrimSpace(env(EnvXDGConfigHome))
	if dir == "" || !filepath.IsAbs(dir) { // the XDG rule: a relative value is ignored
		// The home directory as the environment names it (env is the
		// process's in production), never guessed otherwise.
		home := strings.TrimSpace(env("HOME"))
		if home == "" {
			home = strings.TrimSpace(env("USERPROFILE"))
		}
		if home == "" {
			return "", errNoHome
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, credentialsDir, credentialsName), nil
}

// addrKey is the key of --addr in the file: its base URL, without the
// API prefix (http://127.0.0.1:8080 for 127.0.0.1:8080 and
// http://127.0.0.1:8080/ alike).
func addrKey(addr string) (string, error) {
	base, err := baseURL(addr)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(base, APIPrefix), nil
}

// readCredentials reads the file at path; a missing file is an empty one.
func readCredentials(path string) (credentialsFile, error) {
	var f credentialsFile
	// #nosec G304 -- the credentials file under the user's own config directory
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return credentialsFile{Logins: map[string]login{}}, nil
	}
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %v", path, err)
	}
	if f.Logins == nil {
		f.Logins = map[string]login{}
	}
	return f, nil
}

// writeCredentials replaces the file at path with f: the directory is
// created 0700 (and an existing one narrowed to it), the file written
// 0600 to a temporary name beside it, synced and renamed into place.
func writeCredentials(path string, f credentialsFile) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+credentialsName+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// storedLogin returns the sign-in kept for addr, if any.
func storedLogin(env func(string) string, addr string) (login, bool, error) {
	path, err := credentialsPath(env)
	if errors.Is(err, errNoHome) {
		return login{}, false, nil // nowhere to look: no sign-in
	} else if err != nil {
		return login{}, false, err
	}
	key, err := addrKey(addr)
	if err != nil {
		return login{}, false, err
	}
	f, err := readCredentials(path)
	if err != nil {
		return login{}, false, err
	}
	l, ok := f.Logins[key]
	return l, ok && l.AccessToken != "", nil
}

// updateLogin stores (l non-nil) or forgets (nil) the sign-in of addr,
// keeping every other.
func updateLogin(env func(string) string, addr string, l *login) (string, error) {
	path, err := credentialsPath(env)
	if err != nil {
		return "", err
	}
	key, err := addrKey(addr)
	if err != nil {
		return "", err
	}
	f, err := readCredentials(path)
	if err != nil {
		return path, err
	}
	if l == nil {
		if _, ok := f.Logins[key]; !ok {
			return path, nil
		}
		delete(f.Logins, key)
	} else {
		f.Logins[key] = *l
	}
	return path, writeCredentials(path, f)
}
