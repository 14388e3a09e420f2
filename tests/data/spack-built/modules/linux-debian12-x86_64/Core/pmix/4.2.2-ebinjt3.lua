-- -*- lua -*-
-- Module file created by spack (https://github.com/spack/spack) on 2026-11-27 20:01:34.872764
--
-- pmix@4.2.2~munge~python~restful build_system=autotools platform=linux os=debian12 target=x86_64/ebinjt3
--

whatis([[Name : pmix]])
whatis([[Version : 4.2.2]])
whatis([[Target : x86_64]])
whatis([[Short description : The Process Management Interface (PMI) has been used for quite some time as a means of exchanging wireup information needed for interprocess communication. However, meeting the significant orchestration challenges presented by exascale systems requires that the process-to-system interface evolve to permit a tighter integration between the different components of the parallel application and existing and future SMS solutions.]])
whatis([[Configure options : unknown, software installed outside of Spack]])

help([[Name   : pmix]])
help([[Version: 4.2.2]])
help([[Target : x86_64]])
help()
help([[The Process Management Interface (PMI) has been used for quite some time
as a means of exchanging wireup information needed for interprocess
communication. However, meeting the significant orchestration challenges
presented by exascale systems requires that the process-to-system
interface evolve to permit a tighter integration between the different
components of the parallel application and existing and future SMS
solutions. PMI Exascale (PMIx) addresses these needs by providing an
extended version of the PMI definitions specifically designed to support
exascale and beyond environments by: (a) adding flexibility to the
functionality expressed in the existing APIs, (b) augmenting the
interfaces with new APIs that provide extended capabilities, (c) forging
a collaboration between subsystem providers including resource manager,
fabric, file system, and programming library developers, (d)
establishing a standards-like body for maintaining the definitions, and
(e) providing a reference implementation of the PMIx standard that
demonstrates the desired level of scalability while maintaining strict
separation between it and the standard itself.]])



prepend_path("CMAKE_PREFIX_PATH", "/usr/lib/x86_64-linux-gnu/pmix2/.", ":")

