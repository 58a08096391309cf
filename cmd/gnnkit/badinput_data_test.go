package main

import (
	"testing"
)

// TestTrainRowNormSignedFeatures: the default --feature-norm row keeps
// signed features (synthetic:sbm) learnable. Dividing each row by its
// plain sum scaled rows that sum to nearly 0 up thousands of times and
// flipped the signs of rows with a negative sum: test accuracy 0.30 where
// --feature-norm none gives 0.99.
func TestTrainRowNormSignedFeatures(t *testing.T) {
	spec := "synthetic:sbm,nodes=2000,classes=8,feat=64"
	row := trainJSON(t, "--epochs", "50", "--data", spec)
	none := trainJSON(t, "--epochs", "50", "--data", spec, "--feature-norm", "none")
	if row.TestAcc < 0.8 || none.TestAcc < 0.9 {
		t.Errorf("test accuracy %.3f with --feature-norm row, %.3f with none; want >= 0.8 and >= 0.9", row.TestAcc, none.TestAcc)
	}
}
