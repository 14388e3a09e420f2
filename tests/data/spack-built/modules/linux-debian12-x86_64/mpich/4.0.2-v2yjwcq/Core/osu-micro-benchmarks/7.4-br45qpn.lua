-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.610989
--
-- osu-micro-benchmarks@7.4~cuda~graphing~papi~rocm build_system=autotools platform=linux os=debian12 target=zen2/br45qpn
--

whatis([[Name : osu-micro-benchmarks]])
whatis([[Version : 7.4]])
whatis([[Target : zen2]])
whatis([[Short description : The Ohio MicroBenchmark suite is a collection of independent MPI message passing performance microbenchmarks developed and written at The Ohio State University. It includes traditional benchmarks and performance measures such as latency, bandwidth and host overhead and can be used for both traditional and GPU-enhanced nodes.]])
whatis([[Configure options : CC=$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/bin/mpicc CXX=$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/bin/mpicxx LDFLAGS=-lrt]])

help([[Name   : osu-micro-benchmarks]])
help([[Version: 7.4]])
help([[Target : zen2]])
help()
help([[The Ohio MicroBenchmark suite is a collection of independent MPI message
passing performance microbenchmarks developed and written at The Ohio
State University. It includes traditional benchmarks and performance
measures such as latency, bandwidth and host overhead and can be used
for both traditional and GPU-enhanced nodes.]])


depends_on("gcc-runtime/12.2.0-o2jefya")
depends_on("glibc/2.36-2dxfl3z")
depends_on("mpich/4.0.2-v2yjwcq")

prepend_path("CMAKE_PREFIX_PATH", "$SPACK_RUN/env/opt/osu-micro-benchmarks-7.4-gcc12.2.0-br45qpn/.", ":")
prepend_path("PATH", "$SPACK_RUN/env/opt/osu-micro-benchmarks-7.4-gcc12.2.0-br45qpn/libexec/osu-micro-benchmarks/mpi/startup", ":")
prepend_path("PATH", "$SPACK_RUN/env/opt/osu-micro-benchmarks-7.4-gcc12.2.0-br45qpn/libexec/osu-micro-benchmarks/mpi/pt2pt", ":")
prepend_path("PATH", "$SPACK_RUN/env/opt/osu-micro-benchmarks-7.4-gcc12.2.0-br45qpn/libexec/osu-micro-benchmarks/mpi/one-sided", ":")
prepend_path("PATH", "$SPACK_RUN/env/opt/osu-micro-benchmarks-7.4-gcc12.2.0-br45qpn/libexec/osu-micro-benchmarks/mpi/collective", ":")

