-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.920671
--
-- slurm@22.05.8~cgroup~gtk~hdf5~hwloc~mariadb~nvml~pam~pmix+readline~restd~rsmi build_system=autotools sysconfdir=PREFIX/etc platform=linux os=debian12 target=x86_64/nh7wo5g
--

whatis([[Name : slurm]])
whatis([[Version : 22.05.8]])
whatis([[Target : x86_64]])
whatis([[Short description : Slurm is an open source, fault-tolerant, and highly scalable cluster management and job scheduling system for large and small Linux clusters.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : slurm]])
help([[Version: 22.05.8]])
help([[Target : x86_64]])
help()
help([[Slurm is an open source, fault-tolerant, and highly scalable cluster
management and job scheduling system for large and small Linux clusters.
Slurm requires no kernel modifications for its operation and is
relatively self-contained. As a cluster workload manager, Slurm has
three key functions. First, it allocates exclusive and/or non-exclusive
access to resources (compute nodes) to users for some duration of time
so they can perform work. Second, it provides a framework for starting,
executing, and monitoring work (normally a parallel job) on the set of
allocated nodes. Finally, it arbitrates contention for resources by
managing a queue of pending work.]])



prepend_path("MANPATH", "/usr/share/man", ":")
prepend_path("ACLOCAL_PATH", "/usr/share/aclocal", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/lib/pkgconfig", ":")
prepend_path("PKG_CONFIG_PATH", "/usr/share/pkgconfig", ":")
append_path("MANPATH", "", ":")

