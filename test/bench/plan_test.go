package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The largest fleet idles for --idle-largest when it is set, every other scenario (the slow one too, even
// of the same size) for --idle.
func TestPlan(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		opts options
		want []scenario
	}{
		{
			name: "make bench",
			opts: options{nodes: []int{100, 1000, 5000}, idle: 5 * time.Minute, idleLargest: 10 * time.Minute, slowNodes: 1000},
			want: []scenario{
				{nodes: 100, idle: 5 * time.Minute},
				{nodes: 1000, idle: 5 * time.Minute},
				{nodes: 5000, idle: 10 * time.Minute},
				{nodes: 1000, slow: true, idle: 5 * time.Minute},
			},
		},
		{
			name: "no idle-largest",
			opts: options{nodes: []int{5000, 100}, idle: 30 * time.Second},
			want: []scenario{{nodes: 5000, idle: 30 * time.Second}, {nodes: 100, idle: 30 * time.Second}},
		},
		{
			name: "the slow scenario of the largest size",
			opts: options{nodes: []int{1000}, idle: time.Minute, idleLargest: 2 * time.Minute, slowNodes: 1000},
			want: []scenario{{nodes: 1000, idle: 2 * time.Minute}, {nodes: 1000, slow: true, idle: time.Minute}},
		},
		{
			name: "no fleet",
			opts: options{idle: time.Minute, idleLargest: 2 * time.Minute},
			want: []scenario{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, plan(tc.opts))
		})
	}
}
