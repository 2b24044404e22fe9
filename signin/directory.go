package signin

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/oidcd/oidcd/directory"
	"github.com/oidcd/oidcd/fsm"
)

// Sign-in against the site's directories (docs/operators/directories.md).
//
// The rule between local people and directory people: an address that
// belongs to a local person (created by an operator or imported) is
// checked against that person's password only; no directory is asked.
// Any other address is looked up in the directories, in the order of
// their names; the first that knows it decides. A directory person whose
// address a local person already holds cannot sign in until one of the
// two addresses changes (the local person keeps theirs).

// errDirectoryDown: no directory that might know the address answered.
var errDirectoryDown = errors.New("signin: directory unavailable")

// directoryClients holds one client per directory, rebuilt when the
// directory's record changes.
type directoryClients struct {
	mu sync.Mutex
	m  map[string]*cachedDirectory
}

type cachedDirectory struct {
	updated time.Time
	client  *directory.Client
}

// client returns the client of d, building it (and opening the bind
// password with the KEK) when d is new or changed.
func (p *Signin) directoryClient(d fsm.Directory) (*directory.Client, error) {
	p.dirs.mu.Lock()
	defer p.dirs.mu.Unlock()
	if c, ok := p.dirs.m[d.ID]; ok && c.updated.Equal(d.UpdatedAt) {
		return c.client, nil
	}
	pw, err := p.cfg.KEK.Open(d.BindPassword, fsm.DirectoryAAD(d.ID))
	if err != nil {
		return nil, err
	}
	c, err := directory.New(directory.ConfigOf(d, string(pw)))
	if err != nil {
		return nil, err
	}
	if old, ok := p.dirs.m[d.ID]; ok {
		old.client.Close()
	}
	if p.dirs.m == nil {
		p.dirs.m = map[string]*cachedDirectory{}
	}
	p.dirs.m[d.ID] = &cachedDirectory{updated: d.UpdatedAt, client: c}
	return c, nil
}

// directoryPassword checks email and secret against the directories that
// may hold the person (only theirs for a known directory person), and on
// success records the sign-in (creating the person the first time). ok
// false with reason: refused; errDirectoryDown: none could answer.
func (p *Signin) directoryPassword(ctx context.Context, email, secret string, known *fsm.User) (u fsm.User, ok bool, reason string, err error) {
	dirs, err := p.cfg.State.Directories()
	if err != nil {
		return u, false, "", err
	}
	if known != nil {
		mine := dirs[:0]
		for _, d := range dirs {
			if d.ID == known.DirectoryID {
				mine = append(mine, d)
			}
		}
		dirs = mine
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].Name < dirs[j].Name })
	down := false
	for _, d := range dirs {
		c, cerr := p.directoryClient(d)
		if cerr != nil {
			p.log.Error("authorize: directory unusable", "directory", d.ID, "err", cerr)
			down = true
			continue
		}
		person, aerr := c.Authenticate(ctx, email, secret)
		switch {
		case errors.Is(aerr, directory.ErrNoSuchPerson):
			continue
		case errors.Is(aerr, directory.ErrUnavailable):
			p.log.Warn("authorize: directory unavailable", "directory", d.ID, "err", aerr)
			down = true
			continue
		case errors.Is(aerr, directory.ErrInvalidCredentials):
			return u, false, "directory_refused", nil
		case errors.Is(aerr, directory.ErrDisabled):
			return u, false, "directory_disabled", nil
		case aerr != nil:
			return u, false, "", aerr
		}
		cmd := fsm.DirectorySignIn{DirectoryID: d.ID, UserID: directory.UserID(d.ID, person.ID),
			Person: directory.Record(d, person, email), At: p.now()}
		res, aerr := p.cfg.Applier.Apply(ctx, fsm.MustCommand(fsm.TypeDirectorySignIn, cmd))
		if aerr == nil {
			aerr = res.Err
		}
		var ce *fsm.ConflictError
		if errors.As(aerr, &ce) {
			p.log.Warn("authorize: a directory person's address belongs to a local person", "directory", d.ID, "field", ce.Field)
			return u, false, "address_taken", nil
		}
		if aerr != nil {
			return u, false, "", aerr
		}
		u, _ = res.Value.(fsm.User)
		if u.ID == "" {
			if u, err = p.cfg.State.User(cmd.UserID); err != nil {
				return u, false, "", err
			}
		}
		return u, true, "", nil
	}
	if down {
		return u, false, "directory_unavailable", errDirectoryDown
	}
	return u, false, "unknown_account", nil
}
