package schedtest_test

import (
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
)

func TestSplitSchedulerConforms(t *testing.T) {
	schedtest.Run(t, func(t *testing.T) core.Scheduler { return schedtest.Split{K: 3} })
}

// TestOracleAcceptsExactSplit runs a 3-unit, 2-device plan (two streams,
// a gradient reduction) through the executor: exact against sequential.
func TestOracleAcceptsExactSplit(t *testing.T) {
	schedtest.Oracle(t, schedtest.Split{K: 3}, schedtest.OracleOptions{Devices: 2})
}

// TestOracleCatchesWrongWeights checks that the oracle is not vacuous.
func TestOracleCatchesWrongWeights(t *testing.T) {
	for _, model := range []string{"gcn", "sage", "gat"} {
		probs := schedtest.Compare(t, schedtest.Split{K: 3, EqualWeights: true}, model, schedtest.OracleOptions{Devices: 2})
		if len(probs) == 0 {
			t.Errorf("%s: the oracle accepted a scheduler with wrong loss weights", model)
		}
	}
}

func TestStagesConform(t *testing.T) {
	schedtest.Run(t, func(t *testing.T) core.Scheduler { return schedtest.Stages{K: 2, Assign: schedtest.Alternate} })
}

// TestOraclePipelines runs units whose ops span two devices — a chain
// split in halves, and every other op on the other device (forks, joins
// and skip edges across devices) — and must match sequential exactly.
func TestOraclePipelines(t *testing.T) {
	for _, c := range []struct {
		name   string
		assign func(o, n, d int) int
	}{{"halves", schedtest.Halves}, {"alternate", schedtest.Alternate}} {
		t.Run(c.name, func(t *testing.T) {
			schedtest.Oracle(t, schedtest.Stages{K: 3, Assign: c.assign}, schedtest.OracleOptions{Devices: 2})
		})
	}
}

// TestOracleOwnerSteps: the same plans with every parameter stepped on
// its owner (core.Plan.StepOwners): the summed gradients, read from the
// owners, are exact; with alternating ops both devices own parameters and
// reduce into each other.
func TestOracleOwnerSteps(t *testing.T) {
	for _, c := range []struct {
		name  string
		sched core.Scheduler
	}{
		{"split", schedtest.Split{K: 3}},
		{"halves", schedtest.Stages{K: 3, Assign: schedtest.Halves}},
		{"alternate", schedtest.Stages{K: 3, Assign: schedtest.Alternate}},
	} {
		t.Run(c.name, func(t *testing.T) {
			schedtest.Oracle(t, schedtest.Owners{S: c.sched}, schedtest.OracleOptions{Devices: 2})
		})
	}
}

func TestOwnersConform(t *testing.T) {
	schedtest.Run(t, func(t *testing.T) core.Scheduler {
		return schedtest.Owners{S: schedtest.Stages{K: 2, Assign: schedtest.Alternate}}
	})
}
