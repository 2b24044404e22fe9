package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oidcd/oidcd/admin/cli"
	"github.com/oidcd/oidcd/fsm"
)

// A bcrypt hash (libxcrypt) and a Keycloak-style PBKDF2 hash (Python's
// hashlib) of "correct horse battery staple".
const (
	bcryptHash = "$2b$04$q1InSmxkjI2d.mwrmiq6HeRxID781AhVXqicbKVRGOj3mZZl5g8vS"
	pbkdf2Hash = "$pbkdf2-sha256$i=27500,l=32$eD237Q2jMzGsivBCMvgrzw==$Ku0Fs2I0XreDL2Odp5t5KMkM/2dpJgWRDkoRaRTqv+E="
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUserImportFormats: the three file formats carry the same people, and
// a person the server refuses is named by row without stopping the rest.
func TestUserImportFormats(t *testing.T) {
	c := newCLI(t)
	org := c.field("id", "", "org", "create", "--slug", "acme", "--name", "Acme")
	files := map[string]string{
		"people.csv": "email,password_hash,email_verified,organizations\n" +
			"csv1@example.com," + bcryptHash + ",true," + org + "\n" +
			"\"csv2@example.com\",\"" + pbkdf2Hash + "\",false,\n" +
			"csv3@example.com,$1$saltsalt$qjXMvbEw8oaL.CzflDugX/,,\n",
		"people.json": `{"users":[{"email":"json1@example.com","password_hash":"` + bcryptHash + `","organizations":["` + org + `"]},` +
			`{"email":"json2@example.com","email_verified":true},{"email":"json3@example.com","password_hash":"plain"}]}`,
		"array.json": `[{"email":"arr1@example.com"},{"email":"arr2@example.com","phone":"+15551234567"},{"email":"not-an-address"}]`,
		"people.jsonl": `{"email":"l1@example.com","password_hash":"` + pbkdf2Hash + `"}` + "\n\n" +
			`{"email":"l2@example.com"}` + "\n" + `{"email":"l3@example.com","organizations":["00000000-0000-4000-8000-000000000000"]}` + "\n",
	}
	for name, body := range files {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, name, body)
			out, errOut := c.run(cli.ExitServerError, "", "user", "import", path, "--batch", "2")
			contains(t, "stdout", out, "imported 3 rows: 2 created, 0 already there, 1 failed")
			contains(t, "stderr", errOut, "row 3 (", "2/3 rows", "3/3 rows (100%)", "1 person was not imported")
			if _, err := os.Stat(path + ".progress"); !os.IsNotExist(err) {
				t.Errorf("the progress file is left after a complete run: %v", err)
			}
			// Again: everyone is already there or still refused.
			out, _ = c.run(cli.ExitServerError, "", "user", "import", path, "--json")
			var sum struct{ Rows, Created, Exists, Failed int }
			if err := json.Unmarshal([]byte(out), &sum); err != nil || sum != (struct{ Rows, Created, Exists, Failed int }{3, 0, 2, 1}) {
				t.Fatalf("second run: %+v %v\n%s", sum, err, out)
			}
		})
	}
	u, err := c.state.UserByEmail("csv1@example.com")
	if err != nil || u.PasswordHash != bcryptHash || !u.EmailVerified {
		t.Fatalf("csv1: %+v %v", u, err)
	}
	if ms, _ := c.state.MembershipsOfUser(u.ID); len(ms) != 1 || ms[0].OrgID != org {
		t.Fatalf("csv1's memberships: %+v", ms)
	}
	if u, _ := c.state.UserByEmail("csv2@example.com"); u.PasswordHash != pbkdf2Hash || u.EmailVerified {
		t.Fatalf("csv2: %+v", u)
	}
}

func TestUserImportRefusesBadFiles(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct{ name, body, want string }{
		{"bad.csv", "email,password\nx@example.com,secret\n", `unknown column "password"`},
		{"noemail.csv", "phone\n+15551234567\n", "no email column"},
		{"unquoted.csv", "email,password_hash\na@example.com,$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA\n", "quote it"},
		{"verified.csv", "email,email_verified\na@example.com,yes\n", `email_verified "yes"`},
		{"late.json", `[{"email":"a@example.com"},{"email":"b@example.com","pasword_hash":"x"}]`, "person 2"},
		{"object.json", `{"people":[]}`, `{"users": [...]}`},
		{"broken.jsonl", "{\"email\":\"a@example.com\"}\n{\"email\":\n", "line 2"},
		{"people.txt", "x", "--format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut := c.run(cli.ExitUsage, "", "user", "import", writeFile(t, tc.name, tc.body))
			contains(t, "stderr", errOut, tc.want)
		})
	}
	if users, n, _ := c.state.Users(fsm.Page{Page: 1, PageSize: 10}); n != 0 {
		t.Fatalf("a bad file imported people: %+v", users)
	}
}

// TestUserImportResumes: the connection drops during the third batch; the
// progress file holds the two batches the server acknowledged, and the
// same command again sends only the rest.
func TestUserImportResumes(t *testing.T) {
	var requests, cut atomic.Int32
	cut.Store(3)
	var rowsSeen atomic.Int32
	c := newCLIWith(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/users/import") {
				if requests.Add(1) == cut.Load() {
					conn, _, _ := w.(http.Hijacker).Hijack()
					conn.Close()
					return
				}
				b, _ := io.ReadAll(r.Body)
				rowsSeen.Add(int32(strings.Count(string(b), `"email"`)))
				r.Body = io.NopCloser(strings.NewReader(string(b)))
			}
			h.ServeHTTP(w, r)
		})
	})
	var csv strings.Builder
	csv.WriteString("email,password_hash\n")
	for i := range 25 {
		fmt.Fprintf(&csv, "p%02d@example.com,%s\n", i, bcryptHash)
	}
	path := writeFile(t, "people.csv", csv.String())
	_, errOut := c.run(cli.ExitUnreachable, "", "user", "import", path, "--batch", "10")
	contains(t, "stderr", errOut, "20/25 rows", "stopped after row 20 of 25; run the same command again to resume")
	b, err := os.ReadFile(path + ".progress")
	if err != nil || !strings.Contains(string(b), `"rows_done":20`) {
		t.Fatalf("progress file: %s %v", b, err)
	}

	// A changed file is not resumed from another file's progress.
	changed := writeFile(t, "other.csv", csv.String()+"extra@example.com,\n")
	if err := os.WriteFile(changed+".progress", b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut = c.run(cli.ExitUsage, "", "user", "import", changed)
	contains(t, "stderr", errOut, "records another version")

	rowsSeen.Store(0)
	out, errOut := c.run(cli.ExitOK, "", "user", "import", path, "--batch", "10")
	contains(t, "stderr", errOut, "resuming after row 20 of 25")
	contains(t, "stdout", out, "imported 25 rows: 25 created, 0 already there, 0 failed")
	if n := rowsSeen.Load(); n != 5 {
		t.Fatalf("the resumed run sent %d rows, want the 5 left", n)
	}
	if _, n, _ := c.state.Users(fsm.Page{Page: 1, PageSize: 100}); n != 25 {
		t.Fatalf("%d users, want 25", n)
	}
}
