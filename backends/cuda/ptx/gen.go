package ptx

// The PTX files of this directory are generated from ../kernels/*.cu by
// nvcc (CUDA 11.8 or later) and committed, so neither building nor
// testing gnnkit needs the CUDA toolkit. After editing a kernel, run
//
//	go generate ./backends/cuda/ptx
//
// and commit the .ptx files with the .cu change. TestSourcesHavePTX checks
// that every ../kernels/*.cu has a directive here and a .ptx file, and
// TestPTXUpToDate regenerates them when the same nvcc release is
// installed and compares the bytes.

//go:generate nvcc -ptx -arch=sm_80 -O3 ../kernels/elem.cu -o elem.ptx
//go:generate nvcc -ptx -arch=sm_80 -O3 ../kernels/gemm.cu -o gemm.ptx
//go:generate nvcc -ptx -arch=sm_80 -O3 ../kernels/graph.cu -o graph.ptx
//go:generate nvcc -ptx -arch=sm_80 -O3 ../kernels/loss.cu -o loss.ptx
//go:generate nvcc -ptx -arch=sm_80 -O3 ../kernels/optim.cu -o optim.ptx
