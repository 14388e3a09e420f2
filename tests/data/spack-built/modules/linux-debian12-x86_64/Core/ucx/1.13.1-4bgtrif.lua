-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.972057
--
-- ucx@1.13.1~assertions~backtrace_detail+cma~cuda~dc~debug~dm+examples~gdrcopy~gtest~ib_hw_tm~java~knem~logging~mlx5_dv+numa+openmp+optimizations~parameter_checking+pic~rc~rdmacm~rocm+thread_multiple~ucg~ud+verbs~vfs~xpmem build_system=autotools libs:=shared,static opt=3 simd:=auto platform=linux os=debian12 target=x86_64/4bgtrif
--

whatis([[Name : ucx]])
whatis([[Version : 1.13.1]])
whatis([[Target : x86_64]])
whatis([[Short description : a communication library implementing high-performance messaging for MPI/PGAS frameworks]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : ucx]])
help([[Version: 1.13.1]])
help([[Target : x86_64]])
help()
help([[a communication library implementing high-performance messaging for
MPI/PGAS frameworks]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

