package fsm

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// schema1Fixture is a snapshot written by the schema 1 build (commit
// 99a0d9b, JSON records) with a record in every record bucket: two
// organizations, a person with every factor, clients, SSO and app
// sessions, a redeemed and an open code, a consent, a revocation, a
// challenge, a text-message code, a throttle and a pending back-channel
// delivery.
const schema1Fixture = "testdata/schema1.snapshot"

// schema1Copy is a copy of the fixture in dir, for tests that change it.
func schema1Copy(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(schema1Fixture)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "schema1-"+strconv.Itoa(int(time.Now().UnixNano()))+".db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// schema1Records reads every record of the fixture as schema 1 did, with
// encoding/json into its type, and gives each as the JSON of the typed
// value, by bucket and key.
func schema1Records(t *testing.T) map[string]map[string]string {
	t.Helper()
	db, err := bolt.Open(schema1Copy(t, t.TempDir()), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]map[string]string{}
	err = db.View(func(tx *bolt.Tx) error {
		if v := string(tx.Bucket(bucketMeta).Get(keySchema)); v != "1" {
			t.Fatalf("fixture schema: got %q, want 1", v)
		}
		for _, rb := range recordBuckets() {
			recs := map[string]string{}
			b := tx.Bucket(rb.bucket)
			if b == nil {
				continue // a bucket added after schema 1 (directories)
			}
			err := b.ForEach(func(k, v []byte) error {
				rec := rb.newRec()
				if err := json.Unmarshal(v, rec); err != nil {
					return err
				}
				recs[string(k)] = mustJSON(t, rec)
				return nil
			})
			if err != nil {
				return err
			}
			out[string(rb.bucket)] = recs
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkMigrated: f is at schema 2, every record of the fixture is there
// under its key, stored with the record codec (not JSON) and reading back
// to the same typed value, and the bearer path's check reads it.
func checkMigrated(t *testing.T, f *FSM, want map[string]map[string]string) {
	t.Helper()
	err := f.db.View(func(tx *bolt.Tx) error {
		if v := string(tx.Bucket(bucketMeta).Get(keySchema)); v != strconv.Itoa(SchemaVersion) {
			t.Errorf("schema: got %q, want %d", v, SchemaVersion)
		}
		for _, rb := range recordBuckets() {
			name := string(rb.bucket)
			got := map[string]string{}
			err := tx.Bucket(rb.bucket).ForEach(func(k, v []byte) error {
				if json.Valid(v) {
					t.Errorf("%s/%s: still JSON: %s", name, k, v)
				}
				rec := rb.newRec()
				if err := decodeRecord(v, rec); err != nil {
					return err
				}
				got[string(k)] = mustJSON(t, rec)
				return nil
			})
			if err != nil {
				return err
			}
			if len(got) != len(want[name]) {
				t.Errorf("%s: %d records, want %d", name, len(got), len(want[name]))
			}
			for k, w := range want[name] {
				if got[k] != w {
					t.Errorf("%s/%s:\ngot  %s\nwant %s", name, k, got[k], w)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := f.State().CheckAccess("jti-1", "sid-1", t0.Add(time.Minute), true)
	if err != nil {
		t.Fatalf("CheckAccess after migration: %v", err)
	}
	if acc.UserID != userA || acc.ClientID != "app" || acc.Email == "" {
		t.Fatalf("CheckAccess after migration: got %+v", acc)
	}
	if revoked, err := f.State().Revoked("jti-0"); err != nil || !revoked {
		t.Fatalf("Revoked(jti-0): got %v, %v; want true", revoked, err)
	}
	if _, err := f.State().CheckAccess("jti-0", "sid-1", t0.Add(time.Minute), false); !errors.Is(err, ErrAlreadyUsed) {
		t.Fatalf("CheckAccess of the revoked jti: got %v, want ErrAlreadyUsed", err)
	}
}

// TestSchema1Migrates: a schema 1 file, restored from a snapshot or opened
// in place, is rewritten with the record codec and loses nothing.
func TestSchema1Migrates(t *testing.T) {
	want := schema1Records(t)
	// Buckets that came after schema 2: no schema 1 file holds them.
	later := map[string]bool{string(bucketDirectories): true, string(bucketGrants): true, string(bucketAPIKeys): true,
		string(bucketEmails): true, string(bucketLinks): true, string(bucketInvitations): true,
		string(bucketIdPs): true, string(bucketIdentities): true}
	for _, rb := range recordBuckets() {
		t.Logf("%s: %d records", rb.bucket, len(want[string(rb.bucket)]))
		if len(want[string(rb.bucket)]) == 0 && !later[string(rb.bucket)] {
			t.Errorf("fixture has no %s record: the migration of that bucket goes untested", rb.bucket)
		}
	}
	t.Run("restored", func(t *testing.T) {
		h := newHarness(t)
		fh, err := os.Open(schema1Fixture)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.f.Restore(io.NopCloser(fh)); err != nil {
			t.Fatal(err)
		}
		checkMigrated(t, h.f, want)
		h.index = h.f.Applied()
		conformance(t, h)
	})
	t.Run("opened", func(t *testing.T) {
		p := schema1Copy(t, t.TempDir())
		if err := CheckFile(p); err != nil {
			t.Fatalf("CheckFile of a schema 1 file: %v", err)
		}
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		checkMigrated(t, f, want)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		// Opened again, it is schema 2 already and reads the same.
		f, err = Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		checkMigrated(t, f, want)
	})
	t.Run("newer refused", func(t *testing.T) {
		p := schema1Copy(t, t.TempDir())
		db, err := bolt.Open(p, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keySchema, []byte(strconv.Itoa(SchemaVersion+1)))
		}); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if _, err := Open(p); !errors.Is(err, ErrSchema) {
			t.Fatalf("Open of a newer file: got %v, want ErrSchema", err)
		}
	})
}
