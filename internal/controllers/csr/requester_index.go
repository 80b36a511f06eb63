package csr

import (
	"slices"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// requesterIndex keeps, for each requester, the one request that is decided in full (its newest pending
// request, the head) and the memory of which requests were superseded (supersededRequests). A change to a
// Node or a machine then decides again the head of its requester and the few superseded requests whose
// decision does not say so yet, never every request of the requester: a node that files thousands of
// requests costs one decision per change, and every step here costs O(1), whatever the number of
// siblings.
//
// A request is observed before it is decided for the first time, and before the decision reads the Node
// and the machine: a change that the decision missed is mapped to it. A request not observed yet has its
// first decision ahead of it, which reads the Node and the machine as they are then.
type requesterIndex struct {
	now func() time.Time
	by  map[string]*requester
	mu  sync.Mutex
	// remembered counts the superseded requests remembered over every requester.
	remembered int
	limits     indexLimits
}

// indexLimits bound the memory of superseded requests.
type indexLimits struct {
	// perRequester and total bound the superseded requests remembered by name; beyond them a request is
	// folded into its requester's floor.
	perRequester, total int
	// sweep is how many other requesters an observation looks at for an expired floor.
	sweep int
}

// Default bounds: a superseded request costs about a hundred bytes, so the total is a few MiB.
const (
	maxRememberedPerRequester = 4096
	maxRememberedTotal        = 65536
	// forgetFloor is how long a floor is kept: Kubernetes deletes requests pending for a day.
	forgetFloor = 25 * time.Hour
	floorSweep  = 2
)

// requester is what the index keeps of one requester.
type requester struct {
	// head is the newest pending request observed since the previous head left; it is the only request
	// of the requester decided in full.
	head request
	// superseded remembers the requests that were superseded and whose decision may not say so yet.
	superseded supersededRequests
}

// request names one request and orders it among its siblings.
type request struct {
	created time.Time
	name    string
}

func (r request) newerThan(o request) bool { return newer(r.name, r.created, o.name, o.created) }

func newRequesterIndex(now func() time.Time) *requesterIndex {
	if now == nil {
		now = time.Now
	}

	return &requesterIndex{
		now: now,
		by:  map[string]*requester{},
		limits: indexLimits{
			perRequester: maxRememberedPerRequester, total: maxRememberedTotal, sweep: floorSweep,
		},
	}
}

// observe records that request name of username (created at created) is pending and returns the request
// that supersedes it, or "" when it is to be decided in full; remembered says that the answer comes from
// the memory of superseded requests, which confirm releases once the decision names the superseder.
//
// The newest pending request of a requester is its head. A request older than the head is superseded by
// it; a newer one becomes the head, and the head it displaces is remembered as superseded by it (its
// decision was reached while it was the head, and says nothing of it). The memory outlives the superseding
// request: once that is approved and leaves, an older sibling decided again must not look like the newest.
// A request observed after the head left was never pending beside it, and becomes the head itself.
//
// Requests are created with a precision of one second, and two of one second are ordered by name, which
// says nothing of which came first. decidedHead names the head when the caller found it decided (approved or
// denied) before this request was observed: a request of the same second is then the newer one, as a
// kubelet's request filed once its previous one was approved is (it asks again at once when its Node gained
// names or IPs), where the order of names would have it superseded by the request it follows.
func (x *requesterIndex) observe(name, username string, created time.Time, decidedHead string) (by string, remembered bool) {
	x.mu.Lock()
	defer x.mu.Unlock()

	now := x.now()
	x.sweepLocked(username, now)

	r := x.by[username]
	if r == nil {
		r = &requester{}
		x.by[username] = r
	}

	this := request{name: name, created: created}

	if r.head.name == name {
		return "", false
	}

	if by := r.superseded.of(this, now); by != "" {
		return by, true
	}

	followsHead := decidedHead != "" && r.head.name == decidedHead && this.created.Equal(r.head.created)

	if r.head.name != "" && !this.newerThan(r.head) && !followsHead {
		x.rememberLocked(r, this, r.head.name, now)

		return r.head.name, true
	}

	if r.head.name != "" {
		x.rememberLocked(r, r.head, name, now)
	}

	r.head = this

	return "", false
}

// confirm releases the memory of request name of username: its persisted decision names its superseder,
// and superseded is final.
func (x *requesterIndex) confirm(name, username string) {
	x.mu.Lock()
	defer x.mu.Unlock()

	if r := x.by[username]; r != nil {
		x.remembered -= r.superseded.forget(name)
		x.dropIfEmptyLocked(username, r)
	}
}

// rememberLocked records that older is superseded by newer, within the bounds.
func (x *requesterIndex) rememberLocked(r *requester, older request, newer string, now time.Time) {
	if r.superseded.len() >= x.limits.perRequester || x.remembered >= x.limits.total {
		r.superseded.fold(older, newer, now)

		return
	}

	x.remembered += r.superseded.remember(older.name, newer)
}

// head returns the head of username and when it was created, "" when it has none.
func (x *requesterIndex) head(username string) (string, time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()

	if r := x.by[username]; r != nil {
		return r.head.name, r.head.created
	}

	return "", time.Time{}
}

// remove forgets request name of username: it left (approved, denied, deleted or expired).
func (x *requesterIndex) remove(name, username string) {
	x.mu.Lock()
	defer x.mu.Unlock()

	r := x.by[username]
	if r == nil {
		return
	}

	if r.head.name == name {
		r.head = request{}
	}

	x.remembered -= r.superseded.forget(name)
	x.dropIfEmptyLocked(username, r)
}

func (x *requesterIndex) dropIfEmptyLocked(username string, r *requester) {
	if r.head.name == "" && r.superseded.empty(x.now()) {
		delete(x.by, username)
	}
}

// sweepLocked looks at a few requesters other than username (Go's map iteration starts at a random
// place) and drops those left with nothing but an expired floor: a bounded, lazy pruning.
func (x *requesterIndex) sweepLocked(username string, now time.Time) {
	seen := 0

	for other, r := range x.by {
		if seen >= x.limits.sweep {
			return
		}

		seen++

		if other != username && r.head.name == "" && r.superseded.empty(now) {
			delete(x.by, other)
		}
	}
}

// requests returns the requests to decide again when a fact of username changes (every requester's when
// username is empty): the head, and the superseded requests whose decision may not say so yet, sorted.
func (x *requesterIndex) requests(username string) []resource.Pointer {
	x.mu.Lock()

	var ids []resource.ID

	collect := func(r *requester) {
		if r.head.name != "" {
			ids = append(ids, r.head.name)
		}

		ids = r.superseded.appendNames(ids)
	}

	if username == "" {
		for _, r := range x.by {
			collect(r)
		}
	} else if r := x.by[username]; r != nil {
		collect(r)
	}

	x.mu.Unlock()

	slices.Sort(ids)

	ptrs := make([]resource.Pointer, 0, len(ids))

	for _, id := range ids {
		ptrs = append(ptrs, kube.NewKubeCSR(kube.NamespaceName, id).Metadata())
	}

	return ptrs
}
