// check.cpp runs gnnkit's CUDA kernels on the CPU (cuemu.h) against
// float64 references, with the conformance suite's tolerance rule:
// SpMM (both variants, float and float4 units, every weight mode, mean,
// chunk sizes 1, 3, 7 and 32, and the fused bias+ReLU epilogue bit for bit
// against SpMM + Map), SDDMM, edge softmax and its backward (in place
// too), every GEMM kernel in all transposes with alpha/beta (beta == 0 on
// a C of NaN; TF32 within TF32 rounding), Map in every broadcast form,
// Reduce, gather/scatter, log-softmax, NLL helpers, Adam, SGD, and dropout
// masks bit for bit against core.DropoutKeep (dropout.txt, written by the
// Go test). The host-side choices (units, lanes, chunk tables) mirror
// backends/cuda; grids are small to exercise the grid-stride loops.
//
// Run it through the Go test (it builds this file and writes dropout.txt):
//
//	GNNKIT_CUDA_EMU=1 go test -run TestKernelsEmulated -v ./backends/cuda/ptx
//
// The kernels are included as source, so every call below is type-checked
// against the real kernel signatures.
#include "cuemu.h"
#include "../common.cuh"
#include "../elem.cu"
#include "../gemm.cu"
#include "../graph.cu"
#include "../loss.cu"
#include "../optim.cu"
#include <map>
#include <random>
#include <string>
#include <cassert>

static int failures = 0, checks = 0;
static std::mt19937_64 rng(12345);
static double urand() { return std::uniform_real_distribution<double>(0, 1)(rng); }
static float frand(double scale = 1) { return (float)((2 * urand() - 1) * scale); }
static int irand(int n) { return (int)(rng() % (uint64_t)n); }

static double relTol(int l) { return 1e-5 * (1 + l / 64.0); }

static void check(const std::string &what, const std::vector<float> &got, const std::vector<double> &want,
                  const std::vector<double> &mag, int l, double tolScale = 1) {
	checks++;
	if (got.size() != want.size()) {
		printf("FAIL %s: size %zu want %zu\n", what.c_str(), got.size(), want.size());
		failures++;
		return;
	}
	int bad = 0;
	for (size_t i = 0; i < want.size(); i++) {
		if (std::isnan(want[i])) continue;
		double lim = tolScale * relTol(l) * mag[i] + 1e-30;
		if (!(std::fabs(got[i] - want[i]) <= lim)) {
			if (bad < 3) printf("FAIL %s: [%zu] = %.9g want %.9g (±%.3g)\n", what.c_str(), i, got[i], want[i], lim);
			bad++;
		}
	}
	if (bad) {
		failures++;
		printf("FAIL %s: %d of %zu wrong\n", what.c_str(), bad, want.size());
	}
}

struct Graph {
	int R, S;
	std::vector<i64> off;
	std::vector<int> idx, eid; // eid empty: none
	int numIDs;
	int E() const { return (int)idx.size(); }
	int id(int e) const { return eid.empty() ? e : eid[e]; }
};

// random graph: degrees from a mix, some hubs, some empty rows
static Graph randGraph(int R, int S, int avg, int hubs, int hubDeg, bool eids, int idGap = 0) {
	Graph g{R, S};
	g.off.assign(R + 1, 0);
	std::vector<int> deg(R);
	for (int i = 0; i < R; i++) deg[i] = irand(3) == 0 ? 0 : irand(2 * avg + 1);
	for (int h = 0; h < hubs && R > 0; h++) deg[irand(R)] = hubDeg;
	for (int i = 0; i < R; i++) g.off[i + 1] = g.off[i] + deg[i];
	int E = (int)g.off[R];
	for (int e = 0; e < E; e++) g.idx.push_back(S ? irand(S) : 0);
	if (S == 0) { g.idx.clear(); for (auto &o : g.off) o = 0; E = 0; }
	g.numIDs = E;
	if (eids) {
		std::vector<int> p(E);
		for (int e = 0; e < E; e++) p[e] = e * (1 + idGap) + (idGap ? irand(idGap + 1) : 0);
		std::shuffle(p.begin(), p.end(), rng);
		g.eid = p;
		g.numIDs = 0;
		for (int v : p) g.numIDs = std::max(g.numIDs, v + 1);
	}
	return g;
}

static int lanesFor(int n) {
	if (n <= 1) return 1;
	if (n >= 32) return 32;
	int l = 1;
	while (l < n) l <<= 1;
	return l;
}

struct Tables { i64 nchunks; std::vector<int> chunkRow, fix; };
// buildBalanced mirrors backends/cuda's (graph.go): merge-path chunks.
static Tables buildBalanced(const std::vector<i64> &off, i64 t) {
	int r = (int)off.size() - 1;
	i64 total = r + off[r];
	Tables tb;
	tb.nchunks = (total + t - 1) / t;
	tb.chunkRow.resize(tb.nchunks + 1);
	for (i64 k = 0; k < tb.nchunks; k++) {
		i64 d = k * t;
		int lo = 0, hi = r; // first i with off[i+1] + i >= d
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			if (off[mid + 1] + mid >= d) hi = mid; else lo = mid + 1;
		}
		tb.chunkRow[k] = lo;
	}
	tb.chunkRow[tb.nchunks] = r;
	for (int i = 0; i < r; i++) {
		i64 e0 = off[i], e1 = off[i + 1];
		if (e1 > e0 && (e0 + i) / t != (e1 + i) / t) tb.fix.push_back(i);
	}
	return tb;
}

static dim3 warpGrid(i64 n, int block = 64, int cap = 3) {
	i64 per = block / 32;
	return dim3((unsigned)std::min<i64>((n + per - 1) / per, cap));
}

// variant: 0 warp, else balanced with chunk t = variant
static void runSpmm(const Graph &g, int C, int wmode, int H, const std::vector<float> &w, const std::vector<float> &x,
                    int mean, const float *bias, int act, std::vector<float> &out, int variant) {
	int F = wmode == 2 ? C / H : C;
	bool vec = C % 4 == 0 && (wmode != 2 || F % 4 == 0);
	int units = vec ? C / 4 : C;
	int L = lanesFor(units);
	const int *eid = g.eid.empty() ? nullptr : g.eid.data();
	const float *wp = wmode ? w.data() : nullptr;
	int Hp = wmode == 2 ? H : 1;
	if (variant == 0 || g.E() == 0) {
		auto k = vec ? spmm_warp_vec4 : spmm_warp;
		emu_launch(k, warpGrid(g.R), dim3(64), g.R, C, g.off.data(), g.idx.data(), eid, wp, wmode, Hp, std::max(F, 1), mean,
		           x.data(), bias, act, out.data(), L);
		return;
	}
	i64 t = variant;
	Tables tb = buildBalanced(g.off, t);
	std::vector<float> carry(2 * tb.nchunks * C + 1, NAN);
	auto kb = vec ? spmm_balanced_vec4 : spmm_balanced;
	emu_launch(kb, warpGrid(tb.nchunks), dim3(64), g.R, C, g.off.data(), g.idx.data(), eid, wp, wmode, Hp, std::max(F, 1), mean,
	           x.data(), bias, act, out.data(), L, (i64)g.E(), t, tb.nchunks, (const int *)tb.chunkRow.data(), carry.data());
	if (!tb.fix.empty()) {
		auto kf = vec ? spmm_fixup_vec4 : spmm_fixup;
		emu_launch(kf, warpGrid(tb.fix.size()), dim3(64), g.R, C, g.off.data(), g.idx.data(), eid, wp, wmode, Hp, std::max(F, 1),
		           mean, x.data(), bias, act, out.data(), L, (int)tb.fix.size(), (const int *)tb.fix.data(), t,
		           (const float *)carry.data());
	}
}

static void testSpMM() {
	std::vector<std::pair<std::string, Graph>> graphs = {
	    {"small", randGraph(23, 31, 3, 0, 0, false)},
	    {"hub", randGraph(40, 40, 4, 2, 150, false)},
	    {"eids-gap", randGraph(30, 17, 3, 1, 70, true, 2)},
	    {"reverse-like", randGraph(17, 50, 5, 0, 0, true)},
	    {"no-edges", randGraph(5, 5, 0, 0, 0, false)},
	    {"bipartite-empty-src", randGraph(6, 0, 2, 0, 0, false)},
	    {"empty-runs", randGraph(60, 20, 0, 2, 40, true)},
	};
	for (auto &[gname, g] : graphs) {
		int maxDeg = 0;
		for (int i = 0; i < g.R; i++) maxDeg = std::max<int>(maxDeg, (int)(g.off[i + 1] - g.off[i]));
		for (int C : {1, 3, 4, 8, 16, 17, 64, 132, 256}) {
			for (int wmode : {0, 1, 2}) {
				int H = wmode == 2 ? (C % 4 == 0 ? 4 : C % 3 == 0 ? 3 : C == 17 ? 17 : 1) : 1;
				if (wmode == 2 && H == 1) continue;
				std::vector<float> w(std::max(g.numIDs, 1) * H), x((size_t)g.S * C + 1);
				for (auto &v : w) v = frand(2);
				for (auto &v : x) v = urand() < 0.1 ? 0 : frand();
				int F = C / H;
				for (int mean : {0, 1}) {
					// reference
					std::vector<double> want((size_t)g.R * C, 0), mag((size_t)g.R * C, 0);
					for (int i = 0; i < g.R; i++) {
						for (i64 e = g.off[i]; e < g.off[i + 1]; e++)
							for (int c = 0; c < C; c++) {
								double wv = wmode == 0 ? 1 : w[(size_t)g.id(e) * (wmode == 2 ? H : 1) + (wmode == 2 ? c / F : 0)];
								double t = wv * x[(size_t)g.idx[e] * C + c];
								want[(size_t)i * C + c] += t;
								mag[(size_t)i * C + c] += std::fabs(t);
							}
						i64 d = g.off[i + 1] - g.off[i];
						if (mean && d > 0)
							for (int c = 0; c < C; c++) want[(size_t)i * C + c] /= d, mag[(size_t)i * C + c] /= d;
					}
					std::vector<float> ref;
					for (int variant : {0, 1, 3, 7, 32}) {
						std::vector<float> out((size_t)g.R * C + 1, NAN);
						runSpmm(g, C, wmode, H, w, x, mean, nullptr, 0, out, variant);
						out.pop_back();
						char name[200];
						snprintf(name, sizeof name, "spmm %s C=%d wmode=%d H=%d mean=%d variant=%d", gname.c_str(), C, wmode, H, mean, variant);
						check(name, out, want, mag, maxDeg);
						if (variant == 0) ref = out;
						// fused: bias + relu equals the unfused kernels bit for bit
						if (variant == 0 || variant == 7) {
							std::vector<float> bias(C);
							for (auto &b : bias) b = frand();
							std::vector<float> fused((size_t)g.R * C + 1, NAN);
							runSpmm(g, C, wmode, H, w, x, mean, bias.data(), 1, fused, variant);
							std::vector<float> un = out;
							un.push_back(0);
							if (g.R * C > 0) {
								emu_launch(map_op, dim3(2), dim3(64), 3, (i64)g.R * C, C, 1, C, 0.f, un.data(), bias.data(), un.data());
								emu_launch(map_op, dim3(2), dim3(64), 8, (i64)g.R * C, C, 0, 0, 0.f, un.data(), un.data(), un.data());
							}
							checks++;
							for (int i = 0; i < g.R * C; i++)
								if (memcmp(&fused[i], &un[i], 4) != 0) {
									printf("FAIL fused %s: [%d] %.9g vs unfused %.9g\n", name, i, fused[i], un[i]);
									failures++;
									break;
								}
						}
					}
				}
			}
		}
	}
}

static void testSDDMMSoftmax() {
	std::vector<std::pair<std::string, Graph>> graphs = {
	    {"small", randGraph(23, 31, 3, 0, 0, false)},
	    {"hub", randGraph(40, 40, 4, 1, 100, true, 1)},
	    {"no-edges", randGraph(5, 5, 0, 0, 0, false)},
	};
	for (auto &[gname, g] : graphs) {
		std::vector<int> rows(g.E() + 1);
		if (g.R > 0) emu_launch(csr_rows, dim3(2), dim3(64), g.R, g.off.data(), rows.data());
		checks++;
		for (int i = 0; i < g.R; i++)
			for (i64 e = g.off[i]; e < g.off[i + 1]; e++)
				if (rows[e] != i) { printf("FAIL csr_rows %s\n", gname.c_str()); failures++; i = g.R; break; }
		const int *eid = g.eid.empty() ? nullptr : g.eid.data();
		int maxDeg = 0;
		for (int i = 0; i < g.R; i++) maxDeg = std::max<int>(maxDeg, (int)(g.off[i + 1] - g.off[i]));
		for (int H : {1, 4}) {
			for (int F : {-1, 0, 1, 3, 17, 64}) { // -1: add
				int cols = F < 0 ? H : H * F;
				std::vector<float> a((size_t)g.R * cols + 1), b((size_t)g.S * cols + 1);
				for (auto &v : a) v = frand();
				for (auto &v : b) v = frand();
				std::vector<float> out((size_t)g.numIDs * H + 1, NAN);
				std::vector<double> want((size_t)g.numIDs * H, NAN), mag((size_t)g.numIDs * H, 0);
				for (int i = 0; i < g.R; i++)
					for (i64 e = g.off[i]; e < g.off[i + 1]; e++) {
						int j = g.idx[e];
						for (int h = 0; h < H; h++) {
							double s = 0, sa = 0;
							if (F < 0) {
								s = (double)a[i * cols + h] + b[j * cols + h];
								sa = std::fabs(a[i * cols + h]) + std::fabs(b[j * cols + h]);
							} else
								for (int f = 0; f < F; f++) {
									double t = (double)a[i * cols + h * F + f] * b[j * cols + h * F + f];
									s += t, sa += std::fabs(t);
								}
							want[(size_t)g.id(e) * H + h] = s, mag[(size_t)g.id(e) * H + h] = sa;
						}
					}
				i64 n = (i64)g.E() * H;
				if (n > 0) {
					if (F < 0)
						emu_launch(sddmm_add, dim3(3), dim3(64), n, H, rows.data(), g.idx.data(), eid, a.data(), b.data(), out.data());
					else {
						int L = lanesFor(F);
						emu_launch(sddmm_dot, warpGrid((n + 32 / L - 1) / (32 / L)), dim3(64), n, H, F, L, rows.data(), g.idx.data(), eid,
						           a.data(), b.data(), out.data());
					}
				}
				out.pop_back();
				char name[200];
				snprintf(name, sizeof name, "sddmm %s H=%d F=%d", gname.c_str(), H, F);
				check(name, out, want, mag, std::max(1, F));
			}
			// edge softmax + backward, in place and not
			for (double scale : {1.0, 50.0})
				for (int inPlace : {0, 1}) {
					std::vector<float> s((size_t)g.numIDs * H + 1);
					for (auto &v : s) v = frand(scale);
					std::vector<double> want((size_t)g.numIDs * H, NAN);
					for (int i = 0; i < g.R; i++)
						for (int h = 0; h < H; h++) {
							double m = -INFINITY, sum = 0;
							for (i64 e = g.off[i]; e < g.off[i + 1]; e++) m = std::max(m, (double)s[g.id(e) * H + h]);
							for (i64 e = g.off[i]; e < g.off[i + 1]; e++) sum += std::exp(s[g.id(e) * H + h] - m);
							for (i64 e = g.off[i]; e < g.off[i + 1]; e++) want[g.id(e) * H + h] = std::exp(s[g.id(e) * H + h] - m) / sum;
						}
					std::vector<double> mag(want.size());
					for (size_t i = 0; i < want.size(); i++) mag[i] = std::fabs(want[i]);
					std::vector<float> out = inPlace ? s : std::vector<float>(s.size(), NAN);
					i64 n = (i64)g.R * H;
					if (n > 0) emu_launch(edge_softmax, warpGrid(n), dim3(64), n, H, g.off.data(), eid, inPlace ? out.data() : s.data(), out.data());
					std::vector<float> y(out.begin(), out.end() - 1);
					char name[200];
					snprintf(name, sizeof name, "edge_softmax %s H=%d scale=%g inplace=%d", gname.c_str(), H, scale, inPlace);
					check(name, y, want, mag, maxDeg + 4);
					for (size_t i = 0; i < want.size(); i++)
						if (std::isnan(want[i])) y[i] = 0;
					y.push_back(0);
					std::vector<float> dy(y.size());
					for (auto &v : dy) v = frand();
					std::vector<double> w2(want.size(), NAN), m2(want.size(), 0);
					for (int i = 0; i < g.R; i++)
						for (int h = 0; h < H; h++) {
							double su = 0, sa = 0;
							for (i64 e = g.off[i]; e < g.off[i + 1]; e++) {
								int q = g.id(e) * H + h;
								su += (double)y[q] * dy[q], sa += std::fabs((double)y[q] * dy[q]);
							}
							for (i64 e = g.off[i]; e < g.off[i + 1]; e++) {
								int q = g.id(e) * H + h;
								w2[q] = y[q] * (dy[q] - su), m2[q] = std::fabs(y[q]) * (std::fabs(dy[q]) + sa);
							}
						}
					std::vector<float> dx = inPlace ? dy : std::vector<float>(dy.size(), NAN);
					if (n > 0) emu_launch(edge_softmax_backward, warpGrid(n), dim3(64), n, H, g.off.data(), eid, y.data(), inPlace ? dx.data() : dy.data(), dx.data());
					dx.pop_back();
					snprintf(name, sizeof name, "edge_softmax_backward %s H=%d inplace=%d", gname.c_str(), H, inPlace);
					check(name, dx, w2, m2, maxDeg + 1);
				}
		}
	}
}

typedef void (*GemmFn)(const int, const int, const int, const float, const float *, const float *, const float, float *);
static void testGEMM() {
	struct V { const char *name; GemmFn f[4]; int tile; bool tf32; };
	V vs[] = {
	    {"s", {gemm_f32_s_nn, gemm_f32_s_nt, gemm_f32_s_tn, gemm_f32_s_tt}, 32, false},
	    {"m", {gemm_f32_m_nn, gemm_f32_m_nt, gemm_f32_m_tn, gemm_f32_m_tt}, 64, false},
	    {"l", {gemm_f32_l_nn, gemm_f32_l_nt, gemm_f32_l_tn, gemm_f32_l_tt}, 128, false},
	    {"tf32", {gemm_tf32_nn, gemm_tf32_nt, gemm_tf32_tn, gemm_tf32_tt}, 128, true},
	};
	struct S { int m, k, n; } shapes[] = {{1, 1, 1}, {17, 33, 9}, {64, 64, 64}, {130, 300, 17}, {3, 600, 5}, {40, 2, 300}, {257, 19, 130}, {129, 8, 131}};
	float ab[][2] = {{1, 0}, {0.5f, 2}, {-1.25f, 1}, {2, -0.5f}};
	for (auto &v : vs)
		for (auto &s : shapes)
			for (int tr = 0; tr < 4; tr++)
				for (auto &sc : ab) {
					if (v.tf32 && sc[0] != 1) continue;
					bool ta = tr >= 2, tb = tr % 2 == 1;
					int m = s.m, k = s.k, n = s.n;
					std::vector<float> A(m * k), B(k * n), C(m * n);
					for (auto &x : A) x = urand() < 0.2 ? 0 : frand();
					for (auto &x : B) x = frand();
					for (auto &x : C) x = sc[1] == 0 ? NAN : frand();
					std::vector<double> want(m * n), mag(m * n);
					for (int i = 0; i < m; i++)
						for (int j = 0; j < n; j++) {
							double su = 0, sa = 0;
							for (int q = 0; q < k; q++) {
								double av = ta ? A[q * m + i] : A[i * k + q];
								double bv = tb ? B[j * k + q] : B[q * n + j];
								su += av * bv, sa += std::fabs(av * bv);
							}
							double w = sc[0] * su, mg = std::fabs(sc[0]) * sa;
							if (sc[1] != 0) w += sc[1] * C[i * n + j], mg += std::fabs(sc[1] * C[i * n + j]);
							want[i * n + j] = w, mag[i * n + j] = mg;
						}
					dim3 grid((m + v.tile - 1) / v.tile, (n + v.tile - 1) / v.tile);
					emu_launch(v.f[tr], grid, dim3(256), m, n, k, sc[0], A.data(), B.data(), sc[1], C.data());
					char name[200];
					snprintf(name, sizeof name, "gemm %s m=%d k=%d n=%d ta=%d tb=%d alpha=%g beta=%g", v.name, m, k, n, ta, tb, sc[0], sc[1]);
					// tf32: 10-bit mantissa inputs, relative error ~2^-11 per product
					check(name, C, want, mag, k + 1, v.tf32 ? 100 : 1);
				}
}

static float dref(int op, float a, float b, float alpha) {
	switch (op) {
	case 0: return a; case 1: return alpha; case 2: return alpha * a; case 3: return a + b; case 4: return a - b;
	case 5: return a * b; case 6: return a + alpha * b; case 7: return b; case 8: return a < 0 ? 0 : a;
	case 9: return b > 0 ? a : 0; case 10: return a > 0 ? a : alpha * a; case 11: return b > 0 ? a : a * alpha;
	case 12: return a > 0 ? a : alpha * std::expm1(a); case 13: return b > 0 ? a : a * alpha * std::exp(b);
	case 14: return 1 / (1 + std::exp(-a)); case 15: return a * b * (1 - b); case 16: return std::tanh(a);
	case 17: return a * (1 - b * b); case 18: return std::exp(a);
	}
	return NAN;
}

static void testElem() {
	// map with every broadcast form
	struct RC { int r, c, h; } rcs[] = {{7, 12, 4}, {5, 17, 17}, {1, 8, 2}, {33, 64, 4}};
	for (auto rc : rcs)
		for (int op = 0; op < 19; op++) {
			bool unary = op == 0 || op == 1 || op == 2 || op == 8 || op == 10 || op == 12 || op == 14 || op == 16 || op == 18;
			std::vector<std::pair<int, int>> forms = {{rc.r, rc.c}, {1, rc.c}, {rc.r, 1}, {rc.r, rc.h}, {1, 1}};
			if (unary) forms = {{0, 0}};
			for (auto [br, bc] : forms) {
				int n = rc.r * rc.c;
				std::vector<float> a(n), b(std::max(br * bc, 1)), out(n, NAN);
				for (auto &x : a) x = urand() < 0.15 ? 0 : frand(3);
				for (auto &x : b) x = urand() < 0.15 ? 0 : frand((op == 15 || op == 17) ? 1 : 3);
				emu_launch(map_op, dim3(2), dim3(64), op, (i64)n, rc.c, br, bc, 0.3f, a.data(), b.data(), out.data());
				std::vector<double> want(n), mag(n);
				for (int i = 0; i < rc.r; i++)
					for (int j = 0; j < rc.c; j++) {
						float bv = bc ? b[(br == 1 ? 0 : i) * bc + j / (rc.c / bc)] : 0;
						want[i * rc.c + j] = dref(op, a[i * rc.c + j], bv, 0.3f);
						mag[i * rc.c + j] = std::fabs(want[i * rc.c + j]) + std::fabs(a[i * rc.c + j]) + std::fabs(bv) + 1e-6;
					}
				char name[200];
				snprintf(name, sizeof name, "map op=%d %dx%d b=%dx%d", op, rc.r, rc.c, br, bc);
				check(name, out, want, mag, 2, 2);
			}
		}
	// reduce rows (two stages) and cols
	for (auto [r, c] : std::vector<std::pair<int, int>>{{1, 1}, {5, 17}, {300, 3}, {1000, 12}, {2000, 64}}) {
		std::vector<float> a(r * c);
		for (auto &x : a) x = frand();
		std::vector<double> want(c, 0), mag(c, 0);
		for (int i = 0; i < r; i++)
			for (int j = 0; j < c; j++) want[j] += a[i * c + j], mag[j] += std::fabs(a[i * c + j]);
		for (int rb : {256, 7}) {
			int blocks = (r + rb - 1) / rb;
			std::vector<float> out(c, NAN), part(blocks * c, NAN);
			int gx = (c + 127) / 128;
			if (blocks == 1)
				emu_launch(reduce_rows_part, dim3(gx, 1), dim3(128), r, c, rb, a.data(), out.data());
			else {
				emu_launch(reduce_rows_part, dim3(gx, blocks), dim3(128), r, c, rb, a.data(), part.data());
				emu_launch(reduce_rows_final, dim3(1), dim3(64), blocks, c, part.data(), out.data());
			}
			char name[100];
			snprintf(name, sizeof name, "reduce rows %dx%d rb=%d", r, c, rb);
			check(name, out, want, mag, r);
		}
		for (int G : {1, 4, c}) {
			if (c % G) continue;
			std::vector<float> out(r * G, NAN);
			emu_launch(reduce_cols, dim3(2), dim3(64), (i64)r * G, G, c / G, a.data(), out.data());
			std::vector<double> w2(r * G, 0), m2(r * G, 0);
			for (int i = 0; i < r; i++)
				for (int j = 0; j < c; j++) w2[i * G + j / (c / G)] += a[i * c + j], m2[i * G + j / (c / G)] += std::fabs(a[i * c + j]);
			char name[100];
			snprintf(name, sizeof name, "reduce cols %dx%d G=%d", r, c, G);
			check(name, out, w2, m2, c / G);
		}
	}
	// gather, scatter_add, copy
	{
		int C = 17, R = 11;
		std::vector<float> x(R * C);
		for (auto &v : x) v = frand();
		std::vector<int> idx = {10, 3, 3, 0, 7, 3, 10};
		std::vector<float> out(idx.size() * C, NAN);
		emu_launch(gather, dim3(2), dim3(32), (i64)idx.size() * C, C, idx.data(), x.data(), out.data());
		std::vector<double> want(out.size()), mag(out.size());
		for (size_t q = 0; q < idx.size(); q++)
			for (int c = 0; c < C; c++) want[q * C + c] = x[idx[q] * C + c], mag[q * C + c] = std::fabs(want[q * C + c]);
		check("gather", out, want, mag, 1);
		std::vector<float> o2(R * C);
		for (auto &v : o2) v = frand();
		std::vector<double> w2(o2.begin(), o2.end()), m2(R * C);
		for (int i = 0; i < R * C; i++) m2[i] = std::fabs(o2[i]);
		for (size_t q = 0; q < idx.size(); q++)
			for (int c = 0; c < C; c++) w2[idx[q] * C + c] += out[q * C + c], m2[idx[q] * C + c] += std::fabs(out[q * C + c]);
		emu_launch(scatter_add, dim3(2), dim3(32), (i64)idx.size() * C, C, idx.data(), out.data(), o2.data());
		check("scatter_add", o2, w2, m2, 8);
		for (int n : {0, 1, 5, 64, 1001}) {
			std::vector<float> s(n + 4), d(n + 4, NAN);
			for (auto &v : s) v = frand();
			if (n) emu_launch(copy_f32, dim3(2), dim3(32), (i64)n, s.data(), d.data());
			checks++;
			for (int i = 0; i < n; i++)
				if (d[i] != s[i]) { printf("FAIL copy n=%d at %d\n", n, i); failures++; break; }
			if (!std::isnan(d[n])) { printf("FAIL copy n=%d wrote past the end\n", n); failures++; }
		}
	}
	// log softmax + backward (in place), nll pick, scatter_set
	for (auto [r, c, scale] : std::vector<std::tuple<int, int, double>>{{1, 1, 1}, {7, 7, 3}, {50, 17, 10}, {9, 64, 100}, {3, 100, 2}}) {
		std::vector<float> x(r * c);
		for (auto &v : x) v = frand(scale);
		std::vector<double> want(r * c), mag(r * c);
		for (int i = 0; i < r; i++) {
			double m = -INFINITY, s = 0;
			for (int j = 0; j < c; j++) m = std::max(m, (double)x[i * c + j]);
			for (int j = 0; j < c; j++) s += std::exp(x[i * c + j] - m);
			double lse = m + std::log(s);
			for (int j = 0; j < c; j++) want[i * c + j] = x[i * c + j] - lse, mag[i * c + j] = std::fabs(x[i * c + j]) + std::fabs(lse);
		}
		std::vector<float> y = x;
		emu_launch(log_softmax, dim3(2), dim3(64), r, c, y.data(), y.data());
		char name[100];
		snprintf(name, sizeof name, "log_softmax %dx%d", r, c);
		check(name, y, want, mag, c);
		std::vector<float> dy(r * c);
		for (auto &v : dy) v = frand();
		std::vector<double> w2(r * c), m2(r * c);
		for (int i = 0; i < r; i++) {
			double s = 0, sa = 0;
			for (int j = 0; j < c; j++) s += dy[i * c + j], sa += std::fabs(dy[i * c + j]);
			for (int j = 0; j < c; j++) {
				double p = std::exp((double)y[i * c + j]);
				w2[i * c + j] = dy[i * c + j] - p * s, m2[i * c + j] = std::fabs(dy[i * c + j]) + p * sa;
			}
		}
		emu_launch(log_softmax_backward, dim3(1), dim3(32), r, c, y.data(), dy.data(), dy.data());
		snprintf(name, sizeof name, "log_softmax_backward %dx%d", r, c);
		check(name, dy, w2, m2, c);
	}
	{
		std::vector<float> lp(40);
		for (auto &v : lp) v = frand();
		std::vector<i64> pos = {3, 39, 0, 3};
		std::vector<float> vals(4, NAN);
		emu_launch(nll_pick, dim3(1), dim3(32), (i64)4, pos.data(), lp.data(), vals.data());
		checks++;
		for (int k = 0; k < 4; k++)
			if (vals[k] != lp[pos[k]]) { printf("FAIL nll_pick\n"); failures++; }
		std::vector<float> grad(40, 0), val = {-1, -2, -3};
		std::vector<i64> up = {5, 0, 39};
		emu_launch(scatter_set, dim3(1), dim3(32), (i64)3, up.data(), val.data(), grad.data());
		checks++;
		if (grad[5] != -1 || grad[0] != -2 || grad[39] != -3 || grad[1] != 0) { printf("FAIL scatter_set\n"); failures++; }
	}
	// adam, sgd
	{
		int n = 1000;
		std::vector<float> p(n), g(n), m(n, 0), v(n, 0);
		for (auto &x : p) x = frand();
		for (int step = 1; step <= 3; step++) {
			for (auto &x : g) x = frand();
			float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
			double bc1 = 1 - std::pow((double)b1, step), bc2 = 1 - std::pow((double)b2, step);
			std::vector<double> wp(n), mp(n);
			std::vector<float> p0 = p, m0 = m, v0 = v;
			for (int i = 0; i < n; i++) {
				double gi = (double)g[i] + (double)wd * p0[i];
				double mi = b1 * (double)m0[i] + (1 - (double)b1) * gi, vi = b2 * (double)v0[i] + (1 - (double)b2) * gi * gi;
				double upd = lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps);
				wp[i] = p0[i] - upd, mp[i] = std::fabs(p0[i]) + std::fabs(upd) * 2;
			}
			emu_launch(adam, dim3(2), dim3(64), (i64)n, (float)(lr / bc1), b1, b2, eps, wd, (float)std::sqrt(bc2), p.data(), g.data(), m.data(), v.data());
			check("adam p", p, wp, mp, 8);
		}
		std::vector<float> buf(n, NAN);
		for (int step = 1; step <= 3; step++) {
			for (auto &x : g) x = frand();
			float lr = 0.1f, mu = 0.9f, wd = 5e-4f;
			std::vector<double> wp(n), mp(n), wb(n), mb(n);
			for (int i = 0; i < n; i++) {
				double gi = (double)g[i] + (double)wd * p[i], gm = std::fabs(g[i]) + std::fabs(wd * p[i]);
				if (step > 1) gi += (double)mu * buf[i], gm += std::fabs(mu * buf[i]);
				wb[i] = gi, mb[i] = gm, wp[i] = p[i] - lr * gi, mp[i] = std::fabs(p[i]) + lr * gm;
			}
			emu_launch(sgd, dim3(2), dim3(64), (i64)n, lr, mu, wd, step == 1 ? 1 : 0, 1, p.data(), g.data(), buf.data());
			check("sgd p", p, wp, mp, 4);
			check("sgd buf", buf, wb, mb, 3);
		}
	}
}

// dropout against masks written by Go's core.DropoutKeep (dropout.txt:
// lines "seed p C rows? n" then n mask bits).
static void testDropout() {
	FILE *f = fopen("dropout.txt", "r");
	if (!f) { printf("FAIL no dropout.txt\n"); failures++; return; }
	unsigned long long seed;
	float p;
	int C, hasRows, n;
	while (fscanf(f, "%llu %f %d %d %d", &seed, &p, &C, &hasRows, &n) == 5) {
		std::vector<int> rows(n / C);
		for (auto &r : rows) fscanf(f, "%d", &r);
		std::vector<int> keep(n);
		for (auto &k : keep) fscanf(f, "%d", &k);
		std::vector<float> x(n), out(n, NAN), mask(n, NAN);
		for (auto &v : x) v = frand();
		float scale = p < 1 ? 1 / (1 - p) : 0;
		emu_launch(dropout, dim3(2), dim3(64), (i64)n, C, seed, p, scale, hasRows ? (const int *)rows.data() : nullptr, x.data(), out.data(), mask.data());
		checks++;
		for (int i = 0; i < n; i++) {
			bool k = mask[i] != 0;
			if (k != (bool)keep[i] || out[i] != (k ? x[i] * scale : 0.f)) {
				printf("FAIL dropout seed=%llu p=%g rows=%d at %d: mask %g keep %d\n", seed, p, hasRows, i, mask[i], keep[i]);
				failures++;
				break;
			}
		}
	}
	fclose(f);
}

int main(int argc, char **argv) {
	std::string only = argc > 1 ? argv[1] : "";
	if (only == "" || only == "spmm") testSpMM();
	if (only == "" || only == "sddmm") testSDDMMSoftmax();
	if (only == "" || only == "gemm") testGEMM();
	if (only == "" || only == "elem") testElem();
	if (only == "" || only == "dropout") testDropout();
	printf("%d checks, %d failures\n", checks, failures);
	return failures != 0;
}
