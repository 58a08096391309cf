package dyntrain

import "sort"

// AUC is the area under the ROC curve of scores against 0/1 labels (the
// Mann-Whitney statistic, ties counted half); 0.5 when a class is empty.
func AUC(scores []float32, labels []int32) float64 {
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
	var pos, neg, rankSum float64
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			j++
		}
		avg := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			if labels[idx[k]] == 1 {
				rankSum += avg
				pos++
			} else {
				neg++
			}
		}
		i = j
	}
	if pos == 0 || neg == 0 {
		return 0.5
	}
	return (rankSum - pos*(pos+1)/2) / (pos * neg)
}

// MRR is the mean over queries of 1/rank of each positive among the
// pairs of its query (query[k] groups pairs; ties count half).
func MRR(scores []float32, labels []int32, query []int32) float64 {
	type q struct {
		pos []float32
		all []float32
	}
	qs := map[int32]*q{}
	for k, s := range scores {
		x := qs[query[k]]
		if x == nil {
			x = &q{}
			qs[query[k]] = x
		}
		x.all = append(x.all, s)
		if labels[k] == 1 {
			x.pos = append(x.pos, s)
		}
	}
	var sum float64
	n := 0
	for _, x := range qs {
		for _, p := range x.pos {
			rank := 1.0
			for _, s := range x.all {
				if s > p {
					rank++
				} else if s == p {
					rank += 0.5
				}
			}
			rank -= 0.5 // the positive tied with itself
			sum += 1 / rank
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// F1 is the F1 score of the positive class with the decision score > 0.
func F1(scores []float32, labels []int32) float64 {
	var tp, fp, fn float64
	for k, s := range scores {
		pred := s > 0
		switch {
		case pred && labels[k] == 1:
			tp++
		case pred:
			fp++
		case labels[k] == 1:
			fn++
		}
	}
	if tp == 0 {
		return 0
	}
	return 2 * tp / (2*tp + fp + fn)
}

// MacroF1 averages the F1 of both classes (positive: score > 0).
func MacroF1(scores []float32, labels []int32) float64 {
	neg := make([]float32, len(scores))
	inv := make([]int32, len(labels))
	for k := range scores {
		neg[k] = -scores[k]
		if scores[k] == 0 {
			neg[k] = 1 // score 0 predicts negative
		}
		inv[k] = 1 - labels[k]
	}
	return (F1(scores, labels) + F1(neg, inv)) / 2
}
