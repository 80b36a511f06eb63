package csr

import (
	"slices"
	"sync"

	"github.com/cosi-project/runtime/pkg/resource"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// requesterIndex maps each requester to the requests the decider has seen of it, so that a change to a
// Node or a machine finds the requests to decide again without reading every request: while thousands of
// nodes join, their Nodes change thousands of times, and a label query reads the whole collection.
//
// A request is added before it is decided for the first time, and before the decision reads the Node and
// the machine: a change that the decision missed is mapped to it. A request not added yet has its first
// decision ahead of it, which reads the Node and the machine as they are then.
type requesterIndex struct {
	mu     sync.Mutex
	byUser map[string]map[resource.ID]struct{}
	userOf map[resource.ID]string
}

func newRequesterIndex() *requesterIndex {
	return &requesterIndex{byUser: map[string]map[resource.ID]struct{}{}, userOf: map[resource.ID]string{}}
}

// add records that request id is of username.
func (x *requesterIndex) add(id resource.ID, username string) {
	x.mu.Lock()
	defer x.mu.Unlock()

	if previous, ok := x.userOf[id]; ok {
		if previous == username {
			return
		}

		x.removeLocked(id)
	}

	x.userOf[id] = username

	if x.byUser[username] == nil {
		x.byUser[username] = map[resource.ID]struct{}{}
	}

	x.byUser[username][id] = struct{}{}
}

// remove forgets request id.
func (x *requesterIndex) remove(id resource.ID) {
	x.mu.Lock()
	defer x.mu.Unlock()

	x.removeLocked(id)
}

func (x *requesterIndex) removeLocked(id resource.ID) {
	username, ok := x.userOf[id]
	if !ok {
		return
	}

	delete(x.userOf, id)
	delete(x.byUser[username], id)

	if len(x.byUser[username]) == 0 {
		delete(x.byUser, username)
	}
}

// requests returns the requests of username, every request when username is empty, sorted.
func (x *requesterIndex) requests(username string) []resource.Pointer {
	x.mu.Lock()

	var ids []resource.ID

	if username == "" {
		for id := range x.userOf {
			ids = append(ids, id)
		}
	} else {
		for id := range x.byUser[username] {
			ids = append(ids, id)
		}
	}

	x.mu.Unlock()

	slices.Sort(ids)

	ptrs := make([]resource.Pointer, 0, len(ids))

	for _, id := range ids {
		ptrs = append(ptrs, kube.NewKubeCSR(kube.NamespaceName, id).Metadata())
	}

	return ptrs
}
