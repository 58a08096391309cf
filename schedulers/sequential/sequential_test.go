package sequential_test

import (
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

func TestConformance(t *testing.T) {
	schedtest.Run(t, func(t *testing.T) core.Scheduler { return &sequential.Scheduler{} })
}

// TestOracleSecondDevice is the oracle's self-check: sequential on the
// second logical device against sequential on the first.
func TestOracleSecondDevice(t *testing.T) {
	schedtest.Oracle(t, &sequential.Scheduler{Device: "cpu:1"}, schedtest.OracleOptions{Devices: 2})
}
