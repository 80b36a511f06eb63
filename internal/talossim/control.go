package talossim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// maxControlBody bounds control request bodies: a machine or an address list is a few KiB.
const maxControlBody = 1 << 20

// MachineView is a machine with its fault knobs, as the control API returns it.
type MachineView struct {
	Machine Machine    `json:"machine"`
	Faults  FaultsView `json:"faults"`
}

// FaultsView is Faults with the latency as a Go duration string ("250ms").
type FaultsView struct {
	Latency     string `json:"latency"`
	Unreachable bool   `json:"unreachable"`
	Removed     []Kind `json:"removed,omitempty"`
}

// NewControlHandler returns the HTTP/JSON control API of a fleet (and of its kubelets, when not nil).
// See the package documentation for the routes.
func NewControlHandler(fleet *Fleet, kubelets *Kubelets) http.Handler {
	c := &control{fleet: fleet, kubelets: kubelets}
	mux := http.NewServeMux()

	mux.HandleFunc("GET /machines", c.list)
	mux.HandleFunc("POST /machines", c.add)
	mux.HandleFunc("GET /machines/{name}", c.get)
	mux.HandleFunc("DELETE /machines/{name}", c.remove)
	mux.HandleFunc("PUT /machines/{name}/latency", c.setLatency)
	mux.HandleFunc("PUT /machines/{name}/unreachable", c.setUnreachable)
	mux.HandleFunc("PUT /machines/{name}/addresses", c.setAddresses)
	mux.HandleFunc("PUT /machines/{name}/stage", c.setStage)
	mux.HandleFunc("DELETE /machines/{name}/resources/{kind}", c.removeResource)
	mux.HandleFunc("PUT /machines/{name}/resources/{kind}", c.restoreResource)
	mux.HandleFunc("GET /kubelets/times", c.kubeletTimes)
	mux.HandleFunc("PUT /kubelets/{name}/ready", c.setReady)

	return mux
}

type control struct {
	fleet    *Fleet
	kubelets *Kubelets
}

func (c *control) view(name string) (MachineView, error) {
	m, ok := c.fleet.Machine(name)
	if !ok {
		return MachineView{}, fmt.Errorf("machine %q: %w", name, ErrUnknownMachine)
	}

	f, err := c.fleet.Faults(name)
	if err != nil {
		return MachineView{}, err
	}

	return MachineView{Machine: m, Faults: FaultsView{Latency: f.Latency.String(), Unreachable: f.Unreachable, Removed: f.Removed}}, nil
}

func (c *control) list(w http.ResponseWriter, _ *http.Request) {
	machines := c.fleet.Machines()
	views := make([]MachineView, 0, len(machines))

	for _, m := range machines {
		v, err := c.view(m.Name)
		if err != nil {
			// Removed meanwhile.
			continue
		}

		views = append(views, v)
	}

	writeJSON(w, http.StatusOK, views)
}

func (c *control) get(w http.ResponseWriter, r *http.Request) {
	v, err := c.view(r.PathValue("name"))
	if err != nil {
		writeError(w, err)

		return
	}

	writeJSON(w, http.StatusOK, v)
}

func (c *control) add(w http.ResponseWriter, r *http.Request) {
	var m Machine

	if !readJSON(w, r, &m) {
		return
	}

	if err := c.fleet.AddMachine(m); err != nil {
		writeJSON(w, http.StatusConflict, errorBody{err.Error()})

		return
	}

	c.respond(w, m.Name, nil)
}

func (c *control) remove(w http.ResponseWriter, r *http.Request) {
	if err := c.fleet.RemoveMachine(r.PathValue("name")); err != nil {
		writeError(w, err)

		return
	}

	w.WriteHeader(http.StatusNoContent)
}

func (c *control) setLatency(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Latency string `json:"latency"`
	}

	if !readJSON(w, r, &body) {
		return
	}

	d, err := time.ParseDuration(body.Latency)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("failed to parse latency: %v", err)})

		return
	}

	name := r.PathValue("name")
	c.respond(w, name, c.fleet.SetLatency(name, d))
}

func (c *control) setUnreachable(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Unreachable bool `json:"unreachable"`
	}

	if !readJSON(w, r, &body) {
		return
	}

	name := r.PathValue("name")
	c.respond(w, name, c.fleet.SetUnreachable(name, body.Unreachable))
}

func (c *control) setAddresses(w http.ResponseWriter, r *http.Request) {
	var addrs []Address

	if !readJSON(w, r, &addrs) {
		return
	}

	name := r.PathValue("name")
	c.respond(w, name, c.fleet.SetAddresses(name, addrs))
}

func (c *control) setStage(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Stage string `json:"stage"`
	}

	if !readJSON(w, r, &body) {
		return
	}

	name := r.PathValue("name")
	c.respond(w, name, c.fleet.SetStage(name, body.Stage))
}

func (c *control) removeResource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	c.respond(w, name, c.fleet.RemoveResource(name, Kind(r.PathValue("kind"))))
}

func (c *control) restoreResource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	c.respond(w, name, c.fleet.RestoreResource(name, Kind(r.PathValue("kind"))))
}

func (c *control) kubeletTimes(w http.ResponseWriter, _ *http.Request) {
	if c.kubelets == nil {
		writeJSON(w, http.StatusNotFound, errorBody{"kubelet mode is off (no --kubeconfig)"})

		return
	}

	writeJSON(w, http.StatusOK, c.kubelets.AllTimes())
}

func (c *control) setReady(w http.ResponseWriter, r *http.Request) {
	if c.kubelets == nil {
		writeJSON(w, http.StatusNotFound, errorBody{"kubelet mode is off (no --kubeconfig)"})

		return
	}

	var body struct {
		Ready bool `json:"ready"`
	}

	if !readJSON(w, r, &body) {
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()

	if err := c.kubelets.SetReady(ctx, r.PathValue("name"), body.Ready); err != nil {
		writeJSON(w, http.StatusBadGateway, errorBody{err.Error()})

		return
	}

	w.WriteHeader(http.StatusNoContent)
}

// respond writes err, or the machine's view when the knob was applied.
func (c *control) respond(w http.ResponseWriter, name string, err error) {
	if err != nil {
		writeError(w, err)

		return
	}

	v, err := c.view(name)
	if err != nil {
		writeError(w, err)

		return
	}

	writeJSON(w, http.StatusOK, v)
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusBadRequest
	if errors.Is(err, ErrUnknownMachine) {
		code = http.StatusNotFound
	}

	writeJSON(w, code, errorBody{err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)

	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // The client went away; nothing to tell it.
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxControlBody))
	dec.DisallowUnknownFields()

	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("failed to decode request body: %v", err)})

		return false
	}

	return true
}
