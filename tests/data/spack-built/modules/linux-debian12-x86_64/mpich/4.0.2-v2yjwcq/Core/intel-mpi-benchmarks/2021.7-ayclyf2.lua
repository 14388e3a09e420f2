-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:33.971538
--
-- intel-mpi-benchmarks@2021.7~check+ext+io+mpi1+mt+nbc+p2p+rma build_system=makefile platform=linux os=debian12 target=zen2/ayclyf2
--

whatis([[Name : intel-mpi-benchmarks]])
whatis([[Version : 2021.7]])
whatis([[Target : zen2]])
whatis([[Short description : Intel MPI Benchmarks provides a set of elementary benchmarks that conform to MPI-1, MPI-2, and MPI-3 standard. You can run all of the supported benchmarks, or a subset specified in the command line using one executable file. Use command-line parameters to specify various settings, such as time measurement, message lengths, and selection of communicators.]])

help([[Name   : intel-mpi-benchmarks]])
help([[Version: 2021.7]])
help([[Target : zen2]])
help()
help([[Intel MPI Benchmarks provides a set of elementary benchmarks that
conform to MPI-1, MPI-2, and MPI-3 standard. You can run all of the
supported benchmarks, or a subset specified in the command line using
one executable file. Use command-line parameters to specify various
settings, such as time measurement, message lengths, and selection of
communicators. LICENSE INFORMATION: By downloading and using this
software, you agree to the terms and conditions of the software license
agreements at https://intel.ly/393CijO.]])


depends_on("gcc-runtime/12.2.0-o2jefya")
depends_on("glibc/2.36-2dxfl3z")
depends_on("mpich/4.0.2-v2yjwcq")

prepend_path("PATH", "$SPACK_RUN/env/opt/intel-mpi-benchmarks-2021.7-gcc12.2.0-ayclyf2/bin", ":")
prepend_path("CMAKE_PREFIX_PATH", "$SPACK_RUN/env/opt/intel-mpi-benchmarks-2021.7-gcc12.2.0-ayclyf2/.", ":")

