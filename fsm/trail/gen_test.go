package trail_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	mrand "math/rand"
	"time"

	"github.com/oidcd/oidcd/fsm/trail"
)

// A realistic population: the people, organizations and sessions whose
// events a busy provider writes, drawn from a seeded source so a run is
// repeatable.
type population struct {
	r        *mrand.Rand
	subjects []string
	orgs     []string
	sids     []string
	clients  []string
	ips      []string
	t        time.Time
}

func newPopulation(seed int64, people int) *population {
	r := mrand.New(mrand.NewSource(seed))
	p := &population{r: r, t: time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC)}
	for i := 0; i < people; i++ {
		p.subjects = append(p.subjects, uuid(r))
		p.sids = append(p.sids, sid(r))
		if i%3 == 0 {
			p.ips = append(p.ips, fmt.Sprintf("2001:db8:%x:%x::%x", r.Intn(65536), r.Intn(65536), r.Intn(65536)))
		} else {
			p.ips = append(p.ips, fmt.Sprintf("%d.%d.%d.%d", 1+r.Intn(223), r.Intn(256), r.Intn(256), 1+r.Intn(254)))
		}
	}
	for i := 0; i < 1+people/50; i++ {
		p.orgs = append(p.orgs, uuid(r))
	}
	for i := 0; i < 20; i++ {
		p.clients = append(p.clients, fmt.Sprintf("app-%d", i+1))
	}
	return p
}

func uuid(r *mrand.Rand) string {
	var b [16]byte
	r.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func sid(r *mrand.Rand) string {
	var b [32]byte
	r.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// next is the next event of the mix (seq, prev_hash and hash not set):
// mostly sign-ins and tokens, some sign-outs, a few admin calls, seconds
// apart with the nanoseconds a clock gives.
func (p *population) next() trail.Event {
	r := p.r
	p.t = p.t.Add(time.Duration(1+r.Intn(3))*time.Second + time.Duration(r.Intn(1e9)))
	i := r.Intn(len(p.subjects))
	e := trail.Event{Time: p.t, Outcome: "success", Actor: "person", Subject: p.subjects[i],
		OrgID: p.orgs[i%len(p.orgs)], IP: p.ips[i], Node: fmt.Sprintf("n%d", 1+r.Intn(3))}
	switch k := r.Intn(20); {
	case k < 8:
		e.Type, e.SID, e.ClientID = "signin", p.sids[i], p.clients[i%len(p.clients)]
		e.Detail = trail.EventDetail{"method": []string{"password", "passkey", "totp", "federation"}[r.Intn(4)]}
		if r.Intn(10) == 0 {
			e.Outcome, e.Detail["reason"] = "failure", "bad_password"
		}
	case k < 15:
		e.Type, e.Actor, e.SID, e.ClientID = "token", "client", p.sids[i], p.clients[i%len(p.clients)]
		e.Detail = trail.EventDetail{"grant_type": []string{"authorization_code", "refresh_token"}[r.Intn(2)]}
	case k < 18:
		e.Type, e.SID, e.ClientID = "logout", p.sids[i], p.clients[i%len(p.clients)]
		e.Detail = trail.EventDetail{"cause": "rp_initiated"}
	default:
		e.Type, e.Actor = "admin", "admin"
		e.Detail = trail.EventDetail{"action": []string{"POST /clients", "PATCH /users", "DELETE /sessions"}[r.Intn(3)],
			"target": uuid(r), trail.DetailCredential: `{"kind":"person","sub":"` + p.subjects[0] + `"}`}
	}
	return e
}

// chain gives events seqs from first on and chains them onto prev.
func chain(events []trail.Event, first uint64, prev string) []trail.Event {
	for i := range events {
		events[i].Seq, events[i].PrevHash = first+uint64(i), prev
		h, err := trail.EventHash(events[i])
		if err != nil {
			panic(err)
		}
		events[i].Hash, prev = h, h
	}
	return events
}

// makeTrail is n chained events of the mix from seq first.
func makeTrail(seed int64, people, n int, first uint64) []trail.Event {
	p := newPopulation(seed, people)
	out := make([]trail.Event, n)
	for i := range out {
		out[i] = p.next()
	}
	return chain(out, first, "")
}

// randomEvent is an event of random shape for hash cross-checks: any
// field may be empty, strings any bytes, times in any zone.
func randomEvent(r *mrand.Rand, seq uint64, prev string) trail.Event {
	str := func() string {
		switch r.Intn(4) {
		case 0:
			return ""
		case 1:
			return []string{"signin", "ünï", "a\x00b", "\xff\xfe"}[r.Intn(4)]
		}
		b := make([]byte, r.Intn(40))
		rand.Read(b)
		return string(b)
	}
	e := trail.Event{Seq: seq, Type: str(), Outcome: str(), Actor: str(), Subject: str(), ClientID: str(),
		OrgID: str(), SID: str(), IP: str(), Node: str(), PrevHash: prev}
	if r.Intn(5) > 0 {
		zones := []*time.Location{time.UTC, time.FixedZone("", 3600), time.FixedZone("Y", -7*3600-1800), time.Local}
		e.Time = time.Unix(r.Int63n(1<<34)-1<<33, r.Int63n(1e9)).In(zones[r.Intn(len(zones))])
	}
	if r.Intn(3) > 0 {
		e.Detail = trail.EventDetail{}
		for j := r.Intn(5); j > 0; j-- {
			e.Detail[str()] = str()
		}
	}
	return e
}

func decodeHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
