package e2e_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
	ccmpkg "github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// Each writer and the certificate request watch have an HTTP/2 connection of their own (README,
// Performance), so that certificate requests never wait behind Node traffic: no two of them share one.
func TestWritersOwnConnections(t *testing.T) {
	machines := fleet("conns", 4, 73)
	_, srv := talossim.StartTest(t, machines)

	instance := startCCM(t, srv, app.Options{})

	joinNodes(t, machines)
	waitNodes(t, names(machines), 30*time.Second, initialized)

	writer := func(name string) func(testenv.ConnectionUse) bool {
		return func(u testenv.ConnectionUse) bool { return u.UserAgent == "talos-ccm/"+name }
	}

	// The informers' clients keep client-go's default User-Agent; their paths tell them apart.
	informer := func(path string) func(testenv.ConnectionUse) bool {
		return func(u testenv.ConnectionUse) bool {
			return !strings.HasPrefix(u.UserAgent, "talos-ccm/") && u.Path == path
		}
	}

	clients := map[string]func(testenv.ConnectionUse) bool{
		"the node writer":               writer(ccmpkg.ControllerCloudNode),
		"the certificate approver":      writer(ccmpkg.ControllerCSRApproval),
		"the event writer":              writer("events"),
		"the Node watch":                informer("/api/v1/nodes"),
		"the certificate request watch": informer("/apis/certificates.k8s.io/v1/certificatesigningrequests"),
	}

	// The kubelets submit their certificate requests once their Nodes are initialized; every client
	// above has made a request once they are approved, with an Event each.
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "every client makes requests", func(context.Context) error {
		return testenv.Every(slices.Sorted(maps.Keys(clients)), func(name string) error {
			if len(instance.writes.Connections(clients[name])) == 0 {
				return errors.New("no request")
			}

			return nil
		})
	})

	owner := map[string]string{}

	for name, match := range clients {
		for _, addr := range instance.writes.Connections(match) {
			if other, ok := owner[addr]; ok {
				t.Errorf("%s and %s share the connection from %s", other, name, addr)
			}

			owner[addr] = name
		}
	}
}
