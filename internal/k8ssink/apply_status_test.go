package k8ssink

import (
	"errors"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

func TestRecordOutcome(t *testing.T) {
	t.Parallel()

	version, err := resource.ParseVersion("7")
	require.NoError(t, err)

	earlier := timestamppb.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))

	// written is a status recorded by an earlier write, at version 3.
	written := func() *specs.ApplyStatusSpec {
		return &specs.ApplyStatusSpec{AppliedVersion: "3", AppliedAt: earlier, Writes: []string{"labels and annotations"}}
	}

	// failing is a status after two failed passes.
	failing := func() *specs.ApplyStatusSpec {
		s := written()
		s.Error = "conflict"
		s.ConsecutiveFailures = 2

		return s
	}

	for _, tc := range []struct {
		status *specs.ApplyStatusSpec
		want   *specs.ApplyStatusSpec
		name   string
		o      outcome
		// retry is the requeue interval asked for; zero for none.
		retry time.Duration
		// stamped is true when the pass records its time (the test cannot know it).
		stamped bool
	}{
		{
			name:   "untouched",
			status: failing(),
			o:      untouched(),
			want:   failing(),
		},
		{
			name:   "skipped with a note keeps the failures and the writes",
			status: failing(),
			o:      notFound("Node"),
			want:   &specs.ApplyStatusSpec{AppliedVersion: "3", AppliedAt: earlier, Writes: []string{"labels and annotations"}, Error: "Node not found", ConsecutiveFailures: 2},
		},
		{
			name:   "skipped without a note clears the error",
			status: failing(),
			o:      skipped("").withInitialized(true),
			want:   &specs.ApplyStatusSpec{AppliedVersion: "3", AppliedAt: earlier, Writes: []string{"labels and annotations"}, ConsecutiveFailures: 2, Initialized: true},
		},
		{
			name:    "applied with writes",
			status:  failing(),
			o:       applied("status.addresses"),
			want:    &specs.ApplyStatusSpec{AppliedVersion: "7", Writes: []string{"status.addresses"}},
			stamped: true,
		},
		{
			name:   "a resync that writes nothing keeps the last write",
			status: failing(),
			o:      applied().withNote("the Node has another providerID"),
			want:   &specs.ApplyStatusSpec{AppliedVersion: "3", AppliedAt: earlier, Writes: []string{"labels and annotations"}, Error: "the Node has another providerID"},
		},
		{
			name:    "the first pass is recorded even when it writes nothing",
			status:  &specs.ApplyStatusSpec{},
			o:       applied(),
			want:    &specs.ApplyStatusSpec{AppliedVersion: "7"},
			stamped: true,
		},
		{
			name:   "already applied moves the version only",
			status: written(),
			o:      alreadyApplied(),
			want:   &specs.ApplyStatusSpec{AppliedVersion: "7", AppliedAt: earlier, Writes: []string{"labels and annotations"}},
		},
		{
			name:   "failed",
			status: failing(),
			o:      failed(errors.New("timeout")),
			want:   &specs.ApplyStatusSpec{AppliedVersion: "3", AppliedAt: earlier, Writes: []string{"labels and annotations"}, Error: "timeout", ConsecutiveFailures: 3},
			retry:  4 * time.Second,
		},
		{
			name:    "failed after some writes records them",
			status:  written(),
			o:       failed(errors.New("timeout"), "labels and annotations", "status.addresses").withInitialized(false),
			want:    &specs.ApplyStatusSpec{AppliedVersion: "7", Writes: []string{"labels and annotations", "status.addresses"}, Error: "timeout", ConsecutiveFailures: 1},
			retry:   time.Second,
			stamped: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			before := time.Now()
			err := recordOutcome(tc.status, version, tc.o)

			if tc.retry == 0 {
				require.NoError(t, err)
			} else {
				var requeue *controller.RequeueError

				require.ErrorAs(t, err, &requeue)
				assert.Equal(t, tc.retry, requeue.Interval())
				assert.NoError(t, requeue.Err(), "the status is written")
			}

			if tc.stamped {
				assert.False(t, tc.status.GetAppliedAt().AsTime().Before(before.Truncate(time.Microsecond)), "stamped now")

				tc.want.AppliedAt = tc.status.GetAppliedAt()
			}

			assert.True(t, proto.Equal(tc.want, tc.status), "got %v", tc.status)
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()

	for failures, want := range map[int32]time.Duration{
		0:    time.Second,
		1:    time.Second,
		2:    2 * time.Second,
		5:    16 * time.Second,
		6:    30 * time.Second,
		7:    30 * time.Second,
		1000: 30 * time.Second,
	} {
		assert.Equal(t, want, retryAfter(failures), "after %d failures", failures)
	}
}

func TestSaysSomething(t *testing.T) {
	t.Parallel()

	stamped := timestamppb.Now()

	for _, tc := range []struct {
		status *specs.ApplyStatusSpec
		name   string
		want   bool
		// problems is what a sink that records problems only gets.
		problems bool
	}{
		{name: "nothing", status: &specs.ApplyStatusSpec{Object: "Node/w1"}},
		{name: "a first pass that wrote nothing", status: &specs.ApplyStatusSpec{Object: "Node/w1", AppliedVersion: "2", AppliedAt: stamped}},
		{name: "writes", status: &specs.ApplyStatusSpec{AppliedVersion: "2", AppliedAt: stamped, Writes: []string{"shutdown taint added"}}, want: true},
		{name: "an error", status: &specs.ApplyStatusSpec{Error: "Node not found"}, want: true, problems: true},
		{name: "failures", status: &specs.ApplyStatusSpec{ConsecutiveFailures: 1}, want: true, problems: true},
		{name: "writes and a failure", status: &specs.ApplyStatusSpec{Writes: []string{"Approved"}, ConsecutiveFailures: 1, Error: "timeout"}, want: true, problems: true},
		{name: "an initialized Node", status: &specs.ApplyStatusSpec{AppliedVersion: "2", Initialized: true}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, saysSomething(tc.status, false))
			assert.Equal(t, tc.problems, saysSomething(tc.status, true), "problems only")
		})
	}
}
