package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// requestMetric is the apiservers' counter of the requests they finished, by verb, resource and subresource,
// among other labels. A watch counts once it ends.
const requestMetric = "apiserver_request_total"

// requestTally counts the requests the apiservers finished, by "VERB resource[/subresource]".
type requestTally map[string]float64

// readRequests sums every apiserver's request counter (its /metrics).
func readRequests(ctx context.Context, clients []*kubernetes.Clientset) (requestTally, error) {
	tally := requestTally{}

	for i, client := range clients {
		data, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("failed to read the metrics of apiserver %d: %w", i+1, err)
		}

		if err = tally.add(string(data)); err != nil {
			return nil, fmt.Errorf("apiserver %d: %w", i+1, err)
		}
	}

	return tally, nil
}

// add adds the request counter's samples of a Prometheus text exposition.
func (t requestTally) add(exposition string) error {
	scanner := bufio.NewScanner(strings.NewReader(exposition))
	scanner.Buffer(nil, 1<<20)

	for scanner.Scan() {
		labels, value, ok := strings.Cut(scanner.Text(), "} ")
		if !ok {
			continue
		}

		labels, ok = strings.CutPrefix(labels, requestMetric+"{")
		if !ok {
			continue
		}

		count, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return fmt.Errorf("failed to parse %s{%s}: %w", requestMetric, labels, err)
		}

		t[requestKey(labels)] += count
	}

	if err := scanner.Err(); err != nil {
		return fmt.Errorf("failed to read the metrics: %w", err)
	}

	return nil
}

// requestKey names a sample's request by its labels: `verb="PUT",resource="nodes",subresource=""` is
// "PUT nodes". Label values of this counter hold no comma or quote.
func requestKey(labels string) string {
	var verb, resource, subresource string

	for _, pair := range strings.Split(labels, ",") {
		name, value, _ := strings.Cut(pair, "=")
		value = strings.Trim(value, `"`)

		switch name {
		case "verb":
			verb = value
		case "resource":
			resource = value
		case "subresource":
			subresource = value
		}
	}

	switch {
	case resource == "":
		resource = subresource // a path, for the requests of no resource
	case subresource != "":
		resource += "/" + subresource
	}

	return verb + " " + resource
}

// since is what the requests from before to t are per cluster of n: the kinds that grew only.
func (t requestTally) since(before requestTally, n int) requestTally {
	grown := requestTally{}

	for key, count := range t {
		if d := count - before[key]; d > 0 && n > 0 {
			grown[key] = d / float64(n)
		}
	}

	return grown
}

// String lists the requests, the most first: "3.0 PUT nodes, 0.1 GET /openapi/v3".
func (t requestTally) String() string {
	if len(t) == 0 {
		return "none"
	}

	keys := slices.SortedFunc(maps.Keys(t), func(a, b string) int {
		if t[a] != t[b] {
			if t[a] > t[b] {
				return -1
			}

			return 1
		}

		return strings.Compare(a, b)
	})

	parts := make([]string, 0, len(keys))
	for _, key := range keys {
		parts = append(parts, fmt.Sprintf("%.1f %s", t[key], key))
	}

	return strings.Join(parts, ", ")
}
