-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.317936
--
-- mpich@4.0.2~argobots~cuda+fortran~hcoll+hwloc+hydra~level_zero+libxml2~pci~rocm+romio~slurm~vci~verbs+wrapperrpath~xpmem build_system=autotools datatype-engine=dataloop device=ch4 netmod=ucx patches:=d4c0e99,db4173c,de0de41 pmi=default platform=linux os=debian12 target=zen2/v2yjwcq
--

whatis([[Name : mpich]])
whatis([[Version : 4.0.2]])
whatis([[Target : zen2]])
whatis([[Short description : MPICH is a high performance and widely portable implementation of the Message Passing Interface (MPI) standard.]])
whatis([[Configure options : --disable-maintainer-mode --disable-silent-rules --enable-shared --with-pm=hydra --enable-romio --without-ibverbs --enable-wrapper-rpath=yes --with-yaksa=embedded --without-ze --with-hwloc=/usr --enable-fortran --with-slurm=no --without-cuda --without-hip --with-device=ch4:ucx --with-ucx=/usr --enable-libxml2 --with-datatype-engine=dataloop]])

help([[Name   : mpich]])
help([[Version: 4.0.2]])
help([[Target : zen2]])
help()
help([[MPICH is a high performance and widely portable implementation of the
Message Passing Interface (MPI) standard.]])

-- Services provided by the package
family("mpi")

-- Loading this module unlocks the path below unconditionally
prepend_path("MODULEPATH", "$SPACK_RUN/env/modules/linux-debian12-x86_64/mpich/4.0.2-v2yjwcq/Core")

-- Try to load variables into path to see if providers are there

-- Change MODULEPATH based on the result of the tests above

-- Set variables to notify the provider of the new services
setenv("LMOD_MPI_NAME", "mpich")
setenv("LMOD_MPI_VERSION", "4.0.2-v2yjwcq")

depends_on("gcc-runtime/12.2.0-o2jefya")
depends_on("glibc/2.36-2dxfl3z")
depends_on("hwloc/2.9.0-46bj5mp")
depends_on("libxml2/2.9.14-oiyj3no")
depends_on("ucx/1.13.1-4bgtrif")

prepend_path("PATH", "$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/bin", ":")
prepend_path("MANPATH", "$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/share/man", ":")
prepend_path("PKG_CONFIG_PATH", "$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/lib/pkgconfig", ":")
prepend_path("CMAKE_PREFIX_PATH", "$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/.", ":")
setenv("MPICC", "$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/bin/mpicc")
setenv("MPICXX", "$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/bin/mpicxx")
setenv("MPIF77", "$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/bin/mpif77")
setenv("MPIF90", "$SPACK_RUN/env/opt/mpich-4.0.2-gcc12.2.0-v2yjwcq/bin/mpif90")
append_path("MANPATH", "", ":")

