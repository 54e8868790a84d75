"""The cluster economics, read from the training model's columns: what a design costs and draws.

- ``capital``: the annual cost of owning an asset (capital recovery);
- ``rental``: whether a rented design can be rented, and the whole instances billed;
- ``power``: power at load and at peak, GPUs, servers, fabric, storage, facility;
- ``cost``: up-front, run and total cost, owned or rented;
- ``breakeven``: owning against renting, the utilization where they cost the same;
- ``facility``: a facility's power budget and the power one rack may draw.

The serving model's economics reuse these (objectives/serving/economics.py).
"""
