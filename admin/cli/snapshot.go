package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
)

// snapshotContentType is the media type of a backup on the wire.
const snapshotContentType = "application/octet-stream"

func snapshotSave(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodGet, path: "/snapshot", download: in.args[0],
			note: func([]byte) string {
				return "the snapshot holds every secret of the cluster, the admin token hash included: keep it safe"
			}}, nil
	}
}

// snapshotRestore sends FILE. The server answers 204; the admin token is
// the backup's from then on, which the note says.
func snapshotRestore(fs *flag.FlagSet) func(in *inv) (*request, error) {
	return func(in *inv) (*request, error) {
		return &request{method: http.MethodPost, path: "/snapshot", upload: in.args[0],
			note: func([]byte) string {
				return "every node now holds the backup's state, and the admin token is the backup's: the one that worked when it was saved"
			}}, nil
	}
}

// transfer runs a verb that moves a whole file (req.note must be set): it uploads req.upload as
// the body, or saves the answer's body to req.download. A file that cannot
// be opened or created is a usage error, found before anything is sent.
func (c *conn) transfer(ctx context.Context, req *request, asJSON bool, stdout, stderr io.Writer) int {
	var body io.Reader
	var size int64
	if req.upload != "" {
		f, err := os.Open(req.upload)
		if err != nil {
			return usageError(stderr, err.Error(), "oidcd admin snapshot help")
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return usageError(stderr, req.upload+" is not a regular file", "oidcd admin snapshot help")
		}
		body, size = f, fi.Size()
	}
	var out *atomicFile
	if req.download != "" {
		var err error
		if out, err = createAtomic(req.download); err != nil {
			return usageError(stderr, err.Error(), "oidcd admin snapshot help")
		}
		defer out.abort()
	}

	hr, id, err := c.newHTTPRequest(ctx, req, body)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return ExitUsage
	}
	if body != nil {
		hr.ContentLength = size
		hr.Header.Set("Content-Type", snapshotContentType)
	}
	if out != nil {
		hr.Header.Set("Accept", snapshotContentType+", application/json")
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		fmt.Fprintf(stderr, "error: %s\n", c.transportError(err))
		return ExitUnreachable
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 || out == nil {
		a, err := readAnswer(resp, id)
		if err != nil {
			fmt.Fprintf(stderr, "error: %s\n", c.transportError(err))
			return ExitUnreachable
		}
		if a.status < 200 || a.status > 299 {
			return failed(stderr, a)
		}
		if !asJSON {
			fmt.Fprintf(stdout, "restored the cluster state from %s (%d bytes)\n", clean(req.upload), size)
		}
		fmt.Fprintf(stderr, "note: %s\n", req.note(a.body))
		return ExitOK
	}

	src := &readRecorder{r: resp.Body}
	n, err := io.Copy(out.f, src)
	if err == nil {
		err = out.commit()
	}
	switch {
	case src.err != nil:
		fmt.Fprintf(stderr, "error: the download was cut short after %d bytes: %s; %s was not written\n", n, c.transportError(src.err), clean(req.download))
		return ExitUnreachable
	case err != nil:
		fmt.Fprintf(stderr, "error: saving %s: %v\n", clean(req.download), err)
		return ExitServerError
	}
	if !asJSON {
		fmt.Fprintf(stdout, "saved a snapshot of %d bytes to %s\n", n, clean(req.download))
	}
	fmt.Fprintf(stderr, "note: %s\n", req.note(nil))
	return ExitOK
}

// readRecorder remembers the first read error other than io.EOF, to tell
// a transfer cut short from a local write failure.
type readRecorder struct {
	r   io.Reader
	err error
}

func (r *readRecorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && r.err == nil {
		r.err = err
	}
	return n, err
}

// atomicFile is written under a temporary name next to its final path and
// renamed into place only when complete, so the path never holds a partial
// file. Mode 0600: a backup holds the cluster's secrets.
type atomicFile struct {
	f    *os.File
	path string
	done bool
}

func createAtomic(path string) (*atomicFile, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &atomicFile{f: f, path: path}, nil
}

// commit syncs the file and renames it into place.
func (a *atomicFile) commit() error {
	if err := a.f.Sync(); err != nil {
		return err
	}
	if err := a.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(a.f.Name(), a.path); err != nil {
		return err
	}
	a.done = true
	if d, err := os.Open(filepath.Dir(a.path)); err == nil {
		d.Sync() // the rename outlives a crash
		d.Close()
	}
	return nil
}

// abort removes the temporary file unless commit renamed it.
func (a *atomicFile) abort() {
	if a.done {
		return
	}
	a.f.Close()
	os.Remove(a.f.Name())
}
