package fsm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ErrHeld: another process holds the state file open (bbolt's exclusive
// lock), so the data directory it lives in is in use.
var ErrHeld = errors.New("fsm: held by another process")

// holdWait is how long Open waits for the state file's lock: long enough
// for a process that is just letting go of it (a restart racing the
// previous process's exit), short enough that a second node started on a
// data directory in use is told so at once.
const holdWait = time.Second

// heldError says which data directory is in use and, where the system
// tells (Linux's /proc/locks), by which process.
type heldError struct {
	dir, file string
	pid       int // 0: unknown
}

func (e *heldError) Error() string {
	who := "another oidcd process"
	switch {
	case e.pid == os.Getpid():
		who = "this process"
	case e.pid > 0:
		who = fmt.Sprintf("another oidcd process (pid %d)", e.pid)
	}
	return fmt.Sprintf("%s holds the data directory %s (%s is locked): stop it, or give this node a data directory of its own",
		who, e.dir, e.file)
}

func (e *heldError) Unwrap() error { return ErrHeld }

// held is the error for the state file at path whose lock another process
// holds.
func held(path string) error {
	return &heldError{dir: filepath.Dir(path), file: filepath.Base(path), pid: lockHolder(path)}
}
