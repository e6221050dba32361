# $(call apt_install,TARGET,PACKAGES): a recipe line that apt-installs those of PACKAGES not yet
# installed (root), and says which; quick once they all are. mk/slurm.mk and mk/image.mk use it.
apt_install = missing=""; for p in $(2); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "$(1): installing$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "$(1): $(2) already installed"; fi
