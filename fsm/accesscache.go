package fsm

import (
	"bytes"
	"encoding/binary"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// The access epoch. A bearer check reads eight records (and
// introspection the calling client's credentials); five of them (the
// client, the organization, the membership and its pair index, the
// person) change rarely, while the sessions and revocations change all
// the time. Every write to those five buckets, whatever command makes it,
// increments a counter in the meta bucket in the same transaction (put,
// del, putIndex and the reaper call accessWrite), so a read transaction
// that sees epoch E sees the one content of those buckets that every
// transaction seeing E sees. The read paths keep what they decoded from
// them in an accessGen tagged with E and serve later checks of the same
// epoch from memory: no staleness, because the epoch is read from the
// reader's own transaction, not from a counter beside the database.
//
// Write transactions never use the cache: one that rolls back would have
// filled an epoch that another transaction then commits with other
// content. A restore swaps the database under FSM.mu's write lock and
// counts itself in restores; a generation records that count too.

var keyAccessEpoch = []byte("access_epoch")

// accessBuckets are the buckets the epoch covers.
var accessBuckets = [][]byte{bucketClients, bucketOrgs, bucketMembers, bucketMemberPair, bucketUsers}

// accessWrite increments the access epoch when bucket is one it covers.
// Every write to a bucket goes through here.
func accessWrite(tx *bolt.Tx, bucket []byte) {
	for _, b := range accessBuckets {
		if bytes.Equal(b, bucket) {
			var v [8]byte
			binary.BigEndian.PutUint64(v[:], accessEpoch(tx)+1)
			if err := tx.Bucket(bucketMeta).Put(keyAccessEpoch, v[:]); err != nil {
				panic(err)
			}
			return
		}
	}
}

func accessEpoch(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketMeta).Get(keyAccessEpoch)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// accessGenMax bounds one generation: past it, lookups of new keys go to
// the database without being kept.
const accessGenMax = 1 << 16

// accessGen is what read transactions of one epoch decoded from the
// covered buckets, by kind and id.
type accessGen struct {
	epoch, restores uint64

	mu sync.RWMutex
	m  map[accessKey]accessEntry
}

type accessKey struct {
	kind byte // 'c' client, 'a' client authentication, 'o' organization, 'm' membership by person and organization, 'u' person
	id   string
}

type accessEntry struct {
	found  bool
	client clientView
	auth   clientAuthView
	status string // an organization's or a membership's
	user   userView
}

// accessGenFor returns the generation for tx, a read transaction of the
// current database (FSM.view holds FSM.mu, so restores matches it).
func (f *FSM) accessGenFor(tx *bolt.Tx) *accessGen {
	e, r := accessEpoch(tx), f.restores.Load()
	g := f.accessCache.Load()
	if g != nil && g.epoch == e && g.restores == r {
		return g
	}
	ng := &accessGen{epoch: e, restores: r, m: make(map[accessKey]accessEntry)}
	// A reader that began before the latest write does not push the
	// newer generation out; it gets one of its own for this check.
	if g == nil || r > g.restores || (r == g.restores && e > g.epoch) {
		f.accessCache.CompareAndSwap(g, ng)
	}
	return ng
}

// lookup returns the entry for k, filling it with load on a miss.
func (g *accessGen) lookup(k accessKey, load func() accessEntry) accessEntry {
	if g == nil {
		return load()
	}
	g.mu.RLock()
	e, ok := g.m[k]
	g.mu.RUnlock()
	if ok {
		return e
	}
	e = load()
	g.mu.Lock()
	if len(g.m) < accessGenMax {
		g.m[k] = e
	}
	g.mu.Unlock()
	return e
}

// The covered reads of an access check, through g (nil: straight from
// tx).

func (g *accessGen) client(tx *bolt.Tx, id string) (clientView, bool) {
	e := g.lookup(accessKey{'c', id}, func() (e accessEntry) {
		e.found = get(tx, bucketClients, id, &e.client)
		return e
	})
	return e.client, e.found
}

func (g *accessGen) clientAuth(tx *bolt.Tx, id string) (clientAuthView, bool) {
	e := g.lookup(accessKey{'a', id}, func() (e accessEntry) {
		e.found = get(tx, bucketClients, id, &e.auth)
		return e
	})
	return e.auth, e.found
}

func (g *accessGen) orgStatus(tx *bolt.Tx, id string) (string, bool) {
	e := g.lookup(accessKey{'o', id}, func() (e accessEntry) {
		var v statusView
		e.found = get(tx, bucketOrgs, id, &v)
		e.status = v.Status
		return e
	})
	return e.status, e.found
}

// memberStatus is the status of the membership of userID in orgID.
func (g *accessGen) memberStatus(tx *bolt.Tx, userID, orgID string) (string, bool) {
	pk := pairKey(userID, orgID)
	e := g.lookup(accessKey{'m', pk}, func() (e accessEntry) {
		mid := tx.Bucket(bucketMemberPair).Get([]byte(pk))
		var v statusView
		e.found = mid != nil && get(tx, bucketMembers, string(mid), &v)
		e.status = v.Status
		return e
	})
	return e.status, e.found
}

func (g *accessGen) user(tx *bolt.Tx, id string) (userView, bool) {
	e := g.lookup(accessKey{'u', id}, func() (e accessEntry) {
		e.found = get(tx, bucketUsers, id, &e.user)
		return e
	})
	return e.user, e.found
}
