"""Gantry's Python SDK: submit, follow and manage GPU jobs on a Gantry server.

    from gantry_client import Client
    gantry = Client("http://127.0.0.1:8080", token_file="~/.config/gantry/token")
    job = gantry.submit("python train.py", gpus=4, gpu_types=["A100-80GB"], estimated_duration="2h")
    for chunk in gantry.follow_logs(job.id):
        print(chunk, end="")
"""

from .client import AsyncClient, Client
from .errors import GantryError, GantryUnreachable
from .models import Job

__all__ = ["AsyncClient", "Client", "GantryError", "GantryUnreachable", "Job"]
__version__ = "0.1.0"
