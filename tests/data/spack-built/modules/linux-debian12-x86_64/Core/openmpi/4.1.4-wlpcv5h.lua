-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.504662
--
-- openmpi@4.1.4+atomics~cuda~cxx~cxx_exceptions~debug+fortran~gpfs~internal-hwloc~internal-libevent~internal-pmix~ipv6~java~legacylaunchers~lustre~memchecker~openshmem~orterunprefix~pmi~rocm+romio+rsh~static~two_level_namespace+vt+wrapper-rpath build_system=autotools fabrics:=ucx patches:=12f3aab romio-filesystem:=none schedulers:=slurm platform=linux os=debian12 target=zen2/wlpcv5h
--

whatis([[Name : openmpi]])
whatis([[Version : 4.1.4]])
whatis([[Target : zen2]])
whatis([[Short description : An open source Message Passing Interface implementation.]])
whatis([[Configure options : --enable-shared --disable-silent-rules --disable-sphinx --enable-builtin-atomics --without-pmi --disable-static --enable-mpi1-compatibility --without-xpmem --without-knem --with-ucx=/usr --without-ofi --without-psm --without-mxm --without-psm2 --without-ucc --without-hcoll --without-fca --without-verbs --without-cma --without-xpmem --without-sge --with-slurm --without-lsf --without-loadleveler --without-alps --without-tm --disable-memchecker --with-libevent=/usr --with-pmix=/usr/lib/x86_64-linux-gnu/pmix2 --with-zlib=/usr --with-hwloc=/usr --disable-java --disable-mpi-java --with-gpfs=no --without-cuda --enable-wrapper-rpath --disable-wrapper-runpath --disable-mpi-cxx --disable-cxx-exceptions --enable-mpi-fortran --disable-debug]])

help([[Name   : openmpi]])
help([[Version: 4.1.4]])
help([[Target : zen2]])
help()
help([[An open source Message Passing Interface implementation. The Open MPI
Project is an open source Message Passing Interface implementation that
is developed and maintained by a consortium of academic, research, and
industry partners. Open MPI is therefore able to combine the expertise,
technologies, and resources from all across the High Performance
Computing community in order to build the best MPI library available.
Open MPI offers advantages for system and software vendors, application
developers and computer science researchers.]])

-- Services provided by the package
family("mpi")

-- Loading this module unlocks the path below unconditionally
prepend_path("MODULEPATH", "$SPACK_RUN/env/modules/linux-debian12-x86_64/openmpi/4.1.4-wlpcv5h/Core")

-- Try to load variables into path to see if providers are there

-- Change MODULEPATH based on the result of the tests above

-- Set variables to notify the provider of the new services
setenv("LMOD_MPI_NAME", "openmpi")
setenv("LMOD_MPI_VERSION", "4.1.4-wlpcv5h")

depends_on("gcc-runtime/12.2.0-o2jefya")
depends_on("glibc/2.36-2dxfl3z")
depends_on("hwloc/2.9.0-46bj5mp")
depends_on("libevent/2.1.12-iws7kwn")
depends_on("numactl/2.0.16-k5ykrsh")
depends_on("openssh/9.2p1-iqp2fy5")
depends_on("pmix/4.2.2-ebinjt3")
depends_on("slurm/22.05.8-nh7wo5g")
depends_on("ucx/1.13.1-4bgtrif")
depends_on("zlib/1.2.13-7ghgik2")

prepend_path("PATH", "$SPACK_RUN/env/opt/openmpi-4.1.4-gcc12.2.0-wlpcv5h/bin", ":")
prepend_path("MANPATH", "$SPACK_RUN/env/opt/openmpi-4.1.4-gcc12.2.0-wlpcv5h/share/man", ":")
prepend_path("PKG_CONFIG_PATH", "$SPACK_RUN/env/opt/openmpi-4.1.4-gcc12.2.0-wlpcv5h/lib/pkgconfig", ":")
prepend_path("CMAKE_PREFIX_PATH", "$SPACK_RUN/env/opt/openmpi-4.1.4-gcc12.2.0-wlpcv5h/.", ":")
setenv("MPICC", "$SPACK_RUN/env/opt/openmpi-4.1.4-gcc12.2.0-wlpcv5h/bin/mpicc")
setenv("MPICXX", "$SPACK_RUN/env/opt/openmpi-4.1.4-gcc12.2.0-wlpcv5h/bin/mpic++")
setenv("MPIF77", "$SPACK_RUN/env/opt/openmpi-4.1.4-gcc12.2.0-wlpcv5h/bin/mpif77")
setenv("MPIF90", "$SPACK_RUN/env/opt/openmpi-4.1.4-gcc12.2.0-wlpcv5h/bin/mpif90")
setenv("MPIFC", "$SPACK_RUN/env/opt/openmpi-4.1.4-gcc12.2.0-wlpcv5h/bin/mpifort")
append_path("MANPATH", "", ":")

